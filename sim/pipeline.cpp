// The engine: the microbatch pipeline (launch, forward, backward, loss, retries and repairs).
#include "sim/engine.hpp"

namespace gwtf::sim {

// --- the microbatch pipeline ------------------------------------------------------
void engine::launch(microbatch& mb) {
  mb.launched = true;
  mb.path.assign(static_cast<std::size_t>(S()), mb.holder);
  mb.holds.assign(static_cast<std::size_t>(S()), false);
  mb.bwd_done.assign(static_cast<std::size_t>(S()), false);
  mb.remat.assign(static_cast<std::size_t>(S()), router_->backward_calls());
  mb.bwd_host.assign(static_cast<std::size_t>(S()), mb.holder);
  mb.call_start.assign(static_cast<std::size_t>(S()), 0.0);
  mb.work.assign(static_cast<std::size_t>(S()), 0.0);
  auto next = route(mb, 1, mb.holder);
  if (!next) {
    retry_later(mb, [this, &mb] { launch(mb); });
    return;
  }
  mb.path[1] = *next;
  send_forward(mb, 1);
}

void engine::retry_later(microbatch& mb, std::function<void()> fn) {
  auto epoch = mb.epoch;
  auto* m = &mb;
  at(now_ + std::max(0.05, s_.gwtf.tick_ms / 1000.0), [m, epoch, fn = std::move(fn)] {
    if (m->epoch == epoch)
      fn();
  });
}

// Forward to stage s (s == S: back to the holder for head and loss).
void engine::send_forward(microbatch& mb, int s) {
  if (s < S())
    mb.call_start[static_cast<std::size_t>(s)] = now_;
  ship(mb, input_source(mb, s), s == S() ? mb.holder : mb.path[static_cast<std::size_t>(s)], &engine::arrive_forward,
       s);
}

// Who sends stage s its input: the stage s-1 host that computed it. SWARM's trainer keeps
// every stage's inputs (its code saves them for backward), so when that host is gone SWARM
// sends them from the data holder; GWTF relies on the predecessor's buffer.
std::size_t engine::input_source(const microbatch& mb, int s) const {
  auto prev = mb.path[static_cast<std::size_t>(s - 1)];
  if (via_trainer() && s < S())
    return mb.holder; // the answer to the call of stage s-1 reached the trainer first
  return router_->trainer() && !alive_[prev] ? mb.holder : prev;
}

// Who sends stage s its output gradient: the host that ran stage s+1's backward (the data
// holder for the last stage); SWARM's trainer again keeps a copy.
std::size_t engine::gradient_source(const microbatch& mb, int s) const {
  if (s + 1 >= S())
    return mb.holder;
  auto from = backward_host(mb, s + 1);
  if (via_trainer() && s >= 1)
    return mb.holder; // the answer to the backward call of stage s+1 reached the trainer first
  return router_->trainer() && !alive_[from] ? mb.holder : from;
}

bool engine::via_trainer() const { return router_->trainer() && s_.swarm_via_trainer; }

void engine::answer_to_trainer(microbatch& mb, std::size_t from, std::function<void()> then) {
  if (!via_trainer() || from == mb.holder) {
    then();
    return;
  }
  auto epoch = mb.epoch;
  auto* m = &mb;
  at(transfer_activation(from, mb.holder), [m, epoch, then = std::move(then)] {
    if (m->epoch == epoch)
      then();
  });
}

std::size_t engine::backward_host(const microbatch& mb, int s) const {
  auto st = static_cast<std::size_t>(s);
  return mb.remat[st] ? mb.bwd_host[st] : mb.path[st];
}

// One activation (or its gradient) from -> to, then `arrive(mb, s)` unless re-routed meanwhile.
void engine::ship(microbatch& mb, std::size_t from, std::size_t to, void (engine::*arrive)(microbatch&, int), int s) {
  auto epoch = mb.epoch;
  auto* m = &mb;
  at(transfer_activation(from, to), [this, m, s, epoch, arrive] {
    if (m->epoch == epoch)
      (this->*arrive)(*m, s);
  });
}

void engine::arrive_forward(microbatch& mb, int s) {
  if (s == S()) { // head + loss + head backward at the data holder
    compute(mb.holder, mb, 0, hosts_[mb.holder].compute_s, [this, &mb] { send_backward(mb, S() - 1); }, {});
    return;
  }
  auto h = mb.path[static_cast<std::size_t>(s)];
  if (!alive_[h] || stage_of(h) != s) { // dead, or (a SWARM peer that moved) serving another stage now
    lost(mb, s, false);
    return;
  }
  auto run = [this, &mb, h, s] {
    compute(h, mb, s, hosts_[h].compute_s / 3, [this, &mb, h, s] {
      router_->call_done(mb, h, s, swarm_task::forward);
      if (s + 1 == S()) {
        send_forward(mb, s + 1); // to the data holder: the answer itself
        return;
      }
      answer_to_trainer(mb, h, [this, &mb, h, s] {
        auto next = route(mb, s + 1, h);
        if (!next) {
          retry_later(mb, [this, &mb, s] { reroute_next(mb, s); });
          return;
        }
        mb.path[static_cast<std::size_t>(s + 1)] = *next;
        send_forward(mb, s + 1);
      });
    }, [this, &mb, s] { lost(mb, s, false); });
  };
  if (mb.remat[static_cast<std::size_t>(s)])
    run(); // SWARM's servers keep no activations: no stash slot
  else
    admit(h, mb, false, std::move(run));
}

void engine::reroute_next(microbatch& mb, int s) {
  auto next = route(mb, s + 1, mb.path[static_cast<std::size_t>(s)]);
  if (!next) {
    retry_later(mb, [this, &mb, s] { reroute_next(mb, s); });
    return;
  }
  mb.path[static_cast<std::size_t>(s + 1)] = *next;
  send_forward(mb, s + 1);
}

// Backward into stage s (s == 0: the gradient reaches the holder: done).
void engine::send_backward(microbatch& mb, int s) {
  auto st = static_cast<std::size_t>(s);
  if (s > 0 && mb.remat[st]) {
    swarm_backward_call(mb, s);
    return;
  }
  if (s > 0)
    router_->backward_sent(mb, s);
  ship(mb, gradient_source(mb, s), mb.path[st], &engine::arrive_backward, s);
}

// SWARM's backward call: a peer of stage s chosen by the queue gets the stage's saved input
// and the output gradient, recomputes the forward and runs the backward.
void engine::swarm_backward_call(microbatch& mb, int s) {
  auto st = static_cast<std::size_t>(s);
  auto y = router_->backward_peer(mb, s);
  if (!y) {
    retry_later(mb, [this, &mb, s] { swarm_backward_call(mb, s); });
    return;
  }
  mb.remat[st] = true;
  mb.bwd_host[st] = *y;
  mb.call_start[st] = now_;
  double t = std::max(transfer_activation(input_source(mb, s), *y),
                      transfer_activation(gradient_source(mb, s), *y));
  auto epoch = mb.epoch;
  auto* m = &mb;
  at(t, [this, m, s, epoch] {
    if (m->epoch == epoch)
      arrive_backward(*m, s);
  });
}

void engine::arrive_backward(microbatch& mb, int s) {
  if (s == 0) {
    finish(mb);
    return;
  }
  auto st = static_cast<std::size_t>(s);
  auto h = backward_host(mb, s);
  if (!alive_[h] || stage_of(h) != s) {
    lost(mb, s, true);
    return;
  }
  // rematerialised forward + backward (SWARM's call or a GWTF relay's recompute), else backward
  double work = hosts_[h].compute_s * (mb.remat[st] || remat_ ? 1.0 : 2.0 / 3);
  compute(h, mb, s, work, [this, &mb, h, s] {
    mb.bwd_done[static_cast<std::size_t>(s)] = true;
    router_->call_done(mb, h, s, swarm_task::backward);
    release(mb, s);
    if (s == 1) {
      send_backward(mb, 0); // to the data holder: the answer itself
      return;
    }
    answer_to_trainer(mb, h, [this, &mb, s] { send_backward(mb, s - 1); });
  }, [this, &mb, s] { lost(mb, s, true); });
}

void engine::finish(microbatch& mb) {
  mb.done = true;
  ++res_.microbatches;
  --outstanding_;
  launch_more(mb.holder);
  maybe_end_iteration();
}

// mb needs dead stage-s host path[s] (forward: to compute; backward: its stash).
void engine::lost(microbatch& mb, int s, bool backward) {
  auto dead = backward ? backward_host(mb, s) : mb.path[static_cast<std::size_t>(s)];
  double known = router_->learns_of_loss(mb, dead, s, backward);
  if (now_ < known) { // the sender learns of the crash by timeout
    auto epoch = mb.epoch;
    auto* m = &mb;
    at(known, [this, m, s, backward, epoch] {
      if (m->epoch == epoch)
        lost(*m, s, backward);
    });
    return;
  }
  if (dead == mb.path[static_cast<std::size_t>(s)])
    mb.holds[static_cast<std::size_t>(s)] = false; // the dead host's slot went with it
  switch (router_->call_failed(mb, dead, backward)) {
    case recovery::restart:
      restart(mb);
      return;
    case recovery::retry_stage: // SWARM's stage-level retry: another peer, from the saved input and gradient
      release(mb, s); // a stash left on a live forward peer is of no use any more
      ++mb.epoch;
      swarm_backward_call(mb, s);
      return;
    case recovery::resend:
      break;
  }
  ++mb.epoch;
  // The hop that re-sends is the last live one before s: when the hosts between died too,
  // their stashes and buffered outputs went with them, and each of their stages is
  // recomputed on a replacement (as the runtime's chain of re-sends does). SWARM's trainer
  // keeps every stage's input: it retries stage s itself (input_source).
  int k = s - 1;
  while (!router_->trainer() && k >= 1 && !alive_[mb.path[static_cast<std::size_t>(k)]])
    --k;
  if (!backward) {
    retry_forward(mb, k + 1);
    return;
  }
  repair(mb, k + 1, s);
}

// Forward: the live stage s-1 host re-sends its output to a stage-s host again.
void engine::retry_forward(microbatch& mb, int s) {
  auto y = route(mb, s, mb.path[static_cast<std::size_t>(s - 1)]);
  if (!y) { // path[s] is gone: lost() looks again at who is alive before it
    retry_later(mb, [this, &mb, s] { lost(mb, s, false); });
    return;
  }
  mb.path[static_cast<std::size_t>(s)] = *y;
  send_forward(mb, s);
}

// Backward broke at stage `to`: GWTF's predecessor re-sends its buffered output; a
// replacement recomputes stage j's forward (j = the first stage whose host is gone) and
// passes it on until stage `to`, whose successor then re-sends the gradient it kept.
// Nothing else reruns.
void engine::repair(microbatch& mb, int j, int to) {
  auto from = mb.path[static_cast<std::size_t>(j - 1)];
  auto y = route(mb, j, from);
  if (!y) { // path[to] is still the lost host: lost() looks again at who is alive
    retry_later(mb, [this, &mb, to] { lost(mb, to, true); });
    return;
  }
  auto yy = *y;
  mb.path[static_cast<std::size_t>(j)] = yy;
  auto t = transfer_activation(from, yy);
  auto epoch = mb.epoch;
  auto* m = &mb;
  auto broke = [this, m, to, yy] { // the replacement died too: back off again once it is known
    auto epoch = m->epoch;
    at(std::max(now_, detect_at_[yy]), [this, m, to, epoch] {
      if (m->epoch == epoch)
        lost(*m, to, true);
    });
  };
  at(t, [this, m, j, to, epoch, yy, broke] {
    if (m->epoch != epoch)
      return;
    if (!alive_[yy]) {
      broke();
      return;
    }
    admit(yy, *m, true, [this, m, j, to, yy, broke] {
      compute(yy, *m, j, hosts_[yy].compute_s / 3, [this, m, j, to] {
        if (j == to)
          send_backward(*m, to);
        else
          repair(*m, j + 1, to);
      }, broke);
    });
  });
}

// SWARM: the whole microbatch again from its data holder; all its work is wasted.
void engine::restart(microbatch& mb) {
  for (int st = 0; st < S(); ++st) {
    auto h = mb.path[static_cast<std::size_t>(st)];
    if (alive_[h])
      res_.wasted_s += mb.work[static_cast<std::size_t>(st)];
    if (st > 0 && alive_[h])
      release(mb, st);
  }
  ++mb.epoch;
  if (mb.done) {
    mb.done = false;
    --res_.microbatches;
    ++outstanding_;
  }
  launch(mb);
}

// A crash (peers learn of it `detect` seconds later) or a leave (detect = 0).
// `churn`: false for a SWARM peer that leaves its stage to serve another (not a crash).
void engine::crash(std::size_t h, double detect, bool churn) {
  if (!alive_[h])
    return;
  alive_[h] = false;
  ++life_[h];
  crash_time_[h] = now_;
  detect_at_[h] = now_ + detect;
  // Its slots went with it (a SWARM peer that moves comes back with none).
  for (auto* mb : mbs_)
    for (std::size_t st = 0; st < mb->path.size() && st < mb->holds.size(); ++st)
      if (mb->path[st] == h)
        mb->holds[st] = false;
  inflight_[h] = 0;
  if (churn)
    res_.crash_times_s.push_back(now_);
  // Its work of this iteration is lost with its gradients (running compute: the part done).
  double partial = 0;
  for (auto& [a, b] : running_[h])
    if (a < now_ && b > now_)
      partial += now_ - a;
  res_.wasted_s += iter_work_[h] + partial;
  res_.compute_s += partial;
  auto queued = std::move(waiting_[h]);
  waiting_[h].clear();
  for (auto& w : queued)
    if (w.m == nullptr)
      w.job_lost();
    else if (w.m->epoch == w.epoch)
      lost(*w.m, stage_of(h), w.backward); // waits for the detection itself
  at(detect_at_[h], [this, h] { detected(h); });
}

void engine::apply(const sim_event& e) {
  switch (e.kind) {
    case sim_event_kind::crash:
    case sim_event_kind::leave:
      if (!entered_[e.host] || moving_.count(e.host) > 0) { // still downloading: it never enters
        moving_.erase(e.host);
        left_before_entering_.insert(e.host);
        ++(e.kind == sim_event_kind::crash ? res_.crashes : res_.leaves);
        res_.crash_times_s.push_back(now_);
        return;
      }
      if (alive_[e.host])
        ++(e.kind == sim_event_kind::crash ? res_.crashes : res_.leaves);
      crash(e.host, e.kind == sim_event_kind::crash ? s_.detect_s : 0);
      return;
    case sim_event_kind::join:
      join(e.host);
      return;
    case sim_event_kind::degrade:
      degrade(e);
      return;
  }
}

// The joiner (its stage chosen by the trace: the bottleneck stage, the same for every
// router) downloads the weights from the replica with the fastest link, then enters.
void engine::join(std::size_t j) {
  at(download(stage_of(j), j), [this, j] { enter(j); });
}

// `to` downloads a stage's weights (and optimizer state) from the live replica with the
// fastest link, over the link queues; returns when it has them.
double engine::download(int stage, std::size_t to) {
  std::optional<std::size_t> from;
  double eta = inf;
  for (std::size_t h = 0; h < hosts_.size(); ++h) {
    if (!alive_[h] || stage_of(h) != stage)
      continue;
    auto e = est(h, to);
    double t = s_.stage_weight_bytes / e.bandwidth_bytes_s + e.latency_s;
    if (t < eta) {
      eta = t;
      from = h;
    }
  }
  return from ? expect(transfer(*from, to, s_.stage_weight_bytes)) : now_;
}

void engine::enter(std::size_t j) {
  if (finished_ || left_before_entering_.count(j) > 0)
    return;
  alive_[j] = true;
  entered_[j] = true;
  bound_hosts_.insert({j, stage_of(j)});
  ++res_.joins;
  res_.join_times_s.push_back(now_);
  router_->entered(j);
}

void engine::degrade(const sim_event& e) {
  ++res_.degrades;
  degrade_links(net_, e);
  // Routers see it through measurements: the centralized router's and GWTF's link probes
  // after the detection delay (their next measurement); SWARM in its calls' wall time.
  router_->links_degraded(e.region_a, e.region_b);
}

// Failure detection fired: routers learn of it; microbatches whose gradients at h were
// already accumulated are repaired (GWTF, optimal) or restarted (SWARM).
void engine::detected(std::size_t h) {
  router_->detected(h);
  if (ending_)
    return; // the iteration is being aggregated: every share was computed before the crash
  auto st = static_cast<std::size_t>(stage_of(h));
  for (auto* mb : mbs_) {
    if (!mb->launched || mb->path.size() <= st || backward_host(*mb, static_cast<int>(st)) != h
        || !mb->bwd_done[st])
      continue;
    if (router_->trainer()) { // its accumulated gradients died with it: another microbatch must replace it
      restart(*mb);
      continue;
    }
    repair(*mb, static_cast<int>(st));
  }
}

// The stage-s work of an already finished backward is redone at a replacement from the
// buffered input and gradient (forward + backward of that stage only).
void engine::repair(microbatch& mb, int s) {
  auto prev = mb.path[static_cast<std::size_t>(s - 1)];
  auto y = route(mb, s, prev);
  if (!y) {
    at(now_ + 0.5, [this, &mb, s] { repair(mb, s); });
    return;
  }
  ++pending_repairs_;
  auto yy = *y;
  auto t = transfer_activation(prev, yy);
  auto* m = &mb;
  auto again = [this, m, s, yy] { // yy died: its peers learn it at detection, then retry
    at(std::max(now_, detect_at_[yy]), [this, m, s] {
      --pending_repairs_;
      repair(*m, s);
    });
  };
  at(t, [this, m, s, yy, again] {
    if (!alive_[yy]) {
      again();
      return;
    }
    admit_job(
      yy,
      [this, m, s, yy, again] {
        compute(
          yy, *m, s, hosts_[yy].compute_s,
          [this, yy] {
            free_job(yy);
            --pending_repairs_;
            maybe_end_iteration();
          },
          again,
          false); // a job of its own: the microbatch may still be on its way back
      },
      again);
  });
}

} // namespace gwtf::sim
