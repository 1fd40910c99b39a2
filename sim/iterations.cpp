// The engine: iterations (churn events, joins, detection, aggregation, the bound).
#include "sim/engine.hpp"

namespace gwtf::sim {

// --- iterations --------------------------------------------------------------------
void engine::try_start_iteration() {
  if (!routes_ready()) {
    at(now_ + std::max(0.05, s_.gwtf.tick_ms / 1000.0), [this] { try_start_iteration(); });
    return;
  }
  if (iteration_ == 0)
    res_.setup_s = now_;
  iter_start_ = now_;
  std::fill(iter_work_.begin(), iter_work_.end(), 0.0);
  for (auto& r : running_)
    r.second.clear();
  for (auto* old : mbs_) {
    ++old->epoch; // nothing of an ended iteration may act any more
    for (int st = 1; st < S() && st < static_cast<int>(old->holds.size()); ++st)
      if (alive_[old->path[static_cast<std::size_t>(st)]])
        release(*old, st);
  }
  mbs_.clear();
  router_->before_iteration();
  bound_hosts_.clear();
  for (std::size_t h = 0; h < hosts_.size(); ++h)
    if (alive_[h])
      bound_hosts_.insert({h, stage_of(h)});
  iter_net_ = net_;
  for (auto h : holders_)
    for (int j = 0; j < s_.microbatches_per_holder; ++j) {
      all_.push_back(std::make_unique<microbatch>());
      all_.back()->holder = h;
      all_.back()->index = j;
      mbs_.push_back(all_.back().get());
    }
  outstanding_ = static_cast<int>(mbs_.size());
  res_.flows.push_back(route_count());
  router_->iteration_started();
  double prev_len = res_.iteration_s.empty() ? 1.0 : res_.iteration_s.back();
  auto range = events_by_iteration_.equal_range(iteration_);
  for (auto it = range.first; it != range.second; ++it) {
    const auto* e = &it->second;
    at(now_ + e->at_fraction * prev_len, [this, e] {
      if (!finished_)
        apply(*e);
    });
  }
  for (auto h : holders_)
    launch_more(h);
}

// Keeps as many of the holder's microbatches in flight as it has routes; with none (all
// lost to crashes), looks again after a tick.
void engine::launch_more(std::size_t holder) {
  int limit = router_->concurrency(holder);
  int in_flight = 0, unlaunched = 0;
  for (auto* mb : mbs_) {
    in_flight += mb->holder == holder && mb->launched && !mb->done;
    unlaunched += mb->holder == holder && !mb->launched;
  }
  for (auto* mb : mbs_) {
    if (in_flight >= limit)
      break;
    if (mb->holder != holder || mb->launched)
      continue;
    mb->flow_slot = static_cast<std::size_t>(mb->index);
    ++in_flight;
    --unlaunched;
    launch(*mb);
  }
  if (unlaunched > 0 && in_flight == 0) {
    auto it = iteration_;
    at(now_ + std::max(0.05, s_.gwtf.tick_ms / 1000.0), [this, holder, it] {
      if (iteration_ == it && !ending_)
        launch_more(holder);
    });
  }
}

void engine::maybe_end_iteration() {
  if (outstanding_ > 0 || pending_repairs_ > 0 || ending_)
    return;
  ending_ = true;
  // Stage aggregation: every live replica sends its gradient share to the others, over
  // every pair's link (link_clock applies the round to each pair when it is next used).
  // The last share to arrive: the pairs in the link table report theirs; any other pair's
  // link is free now, so its share arrives now + its transfer, which depends on its two
  // regions only.
  auto R = net_.regions.size();
  link_clock::round round;
  round.at = now_;
  round.stage.assign(hosts_.size(), -1);
  round.bytes.assign(static_cast<std::size_t>(S()), 0.0);
  round.bandwidth.assign(R, std::vector<double>(R, 0.0));
  round.latency.assign(R, std::vector<double>(R, 0.0));
  for (std::size_t a = 0; a < R; ++a)
    for (std::size_t b = 0; b < R; ++b) {
      auto e = to_estimate(net_.link(a, b));
      round.bandwidth[a][b] = e.bandwidth_bytes_s;
      round.latency[a][b] = e.latency_s;
    }
  double end = now_;
  double allreduce = 0; // its least possible time, for the bound
  for (int st = 0; st < S(); ++st) {
    std::vector<std::size_t> per_region(R, 0);
    std::vector<std::size_t> some; // up to two replicas per region: every pair of regions
    std::size_t reps = 0;
    for (std::size_t h = 0; h < hosts_.size(); ++h)
      if (alive_[h] && stage_of(h) == st) {
        round.stage[h] = static_cast<std::int16_t>(st);
        ++reps;
        if (per_region[hosts_[h].region]++ < 2)
          some.push_back(h);
      }
    // All-reduce volume: each replica sends 2 (R-1)/R of the stage's gradient, 2/R to each peer.
    double full = st == 0 && s_.holder_gradient_bytes > 0 ? s_.holder_gradient_bytes : s_.stage_gradient_bytes;
    double share = reps == 0 ? 0 : 2 * full / static_cast<double>(reps);
    round.bytes[static_cast<std::size_t>(st)] = share;
    for (std::size_t a = 0; a < R; ++a)
      for (std::size_t b = 0; b < R; ++b)
        if (per_region[a] > 0 && per_region[b] > (a == b ? 1u : 0u))
          end = std::max(end, now_ + share / round.bandwidth[a][b] + round.latency[a][b]);
    allreduce = std::max(allreduce, allreduce_lower_bound(some, full, [this](std::size_t a, std::size_t b) {
                                                            return est(a, b);
                                                          }, reps));
  }
  end = std::max(end, link_free_.add(std::move(round)));
  record_bound(allreduce);
  res_.aggregation_s.push_back(expect(end) - now_);
  at(end, [this] {
    ending_ = false;
    res_.iteration_s.push_back(now_ - iter_start_);
    res_.iteration_end_s.push_back(now_);
    last_progress_ = now_;
    ++iteration_;
    if (iteration_ >= s_.iterations) {
      finished_ = true;
      return;
    }
    try_start_iteration();
  });
}

// The proven lower bound on this iteration's time (routing/bound.hpp) from every host
// that could work in it, on the links as they were when it started (links only degrade).
void engine::record_bound(double allreduce_s) {
  std::vector<bound_host> hosts;
  std::vector<std::size_t> ids;
  for (auto& [h, st] : bound_hosts_) {
    hosts.push_back({st, stash_capacity_[h], hosts_[h].compute_s, static_cast<std::int64_t>(hosts_[h].region)});
    ids.push_back(h);
  }
  // With adaptive compression no link carries fewer bytes than min_density's sparse tensor:
  // the bound takes that for every link (and no compress time), so it stays a lower bound.
  double bytes = s_.activation_bytes;
  if (s_.compression) {
    auto values = static_cast<std::int64_t>(s_.activation_bytes / static_cast<double>(s_.compression->value_bytes));
    auto forced = *s_.compression;
    forced.every_link = true;
    bytes = std::min(bytes, plan_wire(forced, values, std::nullopt, 0).bytes);
  }
  auto b = bound_iteration(hosts, S(), s_.microbatches_per_holder, bytes,
                           [&](std::size_t a, std::size_t c) {
                             return to_estimate(iter_net_.link(hosts_[ids[a]].region, hosts_[ids[c]].region));
                           },
                           allreduce_s);
  res_.bound_iteration_s.push_back(b.seconds);
  res_.bound_s += b.seconds;
}

} // namespace gwtf::sim
