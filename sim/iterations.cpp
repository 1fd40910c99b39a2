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
  ending_ = phase_done_ = true;
  done_at_ = now_;
  record_bound(); // the microbatches' part, from the hosts that could work in them
  advance();
}

// sync: the next iteration starts on the averaged weights. overlap: it starts on the weights
// before this update (which lands while it runs), once the update before it landed, so every
// update is exactly one iteration stale. The run ends when the last one landed.
void engine::advance() {
  if (!phase_done_ || averaging_ || averaged_upto_ > iteration_)
    return;
  int it = iteration_;
  average_stages(); // may end at once, and then end the iteration that waits for it
  bool last = iteration_ + 1 >= s_.iterations;
  if (iteration_ == it && s_.averaging == model::averaging_mode::overlap && !last)
    end_iteration(false);
}

void engine::end_iteration(bool waited) {
  // The bound's averaging part: under overlap an iteration's averaging may hide behind the
  // next one's microbatches, so only the last one's counts (the sum stays a lower bound).
  if (waited) {
    res_.bound_iteration_s.back() += round_least_;
    res_.bound_s += round_least_;
  }
  res_.aggregation_s.push_back(now_ - done_at_); // the part of the iteration that waits on averaging
  ending_ = phase_done_ = false;
  res_.iteration_s.push_back(now_ - iter_start_);
  res_.iteration_end_s.push_back(now_);
  last_progress_ = now_;
  ++iteration_;
  if (iteration_ >= s_.iterations) {
    finished_ = true;
    return;
  }
  try_start_iteration();
}

// The stages' averaging (hivemind's butterfly all-reduce): each of a stage's n live replicas
// reduces 1/n of the gradient, so every replica sends 2/n of it to every other one (reduce-
// scatter, then all-gather), 2 (n-1)/n in all, over every pair's link at once
// (link_clock applies the round to each pair when it is next used). A host's network card
// carries its 2 (n-1)/n once, whoever it goes to, in the time its transfers leave idle. It
// ends when the last share arrived: the pairs in the link table report theirs; any other
// pair's link is free at the start, so its share arrives then + its transfer, which depends
// on its two regions only.
void engine::average_stages() {
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
  averaging_round avg;
  avg.iteration = iteration_;
  avg.at = now_;
  averaged_upto_ = iteration_ + 1;
  double end = now_;
  for (int st = 0; st < S(); ++st) {
    std::vector<std::size_t> per_region(R, 0);
    std::vector<std::size_t> some; // up to two replicas per region: every pair of regions
    std::vector<std::size_t> members;
    for (std::size_t h = 0; h < hosts_.size(); ++h)
      if (alive_[h] && stage_of(h) == st) {
        round.stage[h] = static_cast<std::int16_t>(st);
        members.push_back(h);
        if (per_region[hosts_[h].region]++ < 2)
          some.push_back(h);
      }
    auto reps = members.size();
    double full = st == 0 && s_.holder_gradient_bytes > 0 ? s_.holder_gradient_bytes : s_.stage_gradient_bytes;
    double share = reps == 0 ? 0 : 2 * full / static_cast<double>(reps);
    round.bytes[static_cast<std::size_t>(st)] = share;
    double lat = inf; // the stage's shortest latency: a card's last byte still has to arrive
    for (std::size_t a = 0; a < R; ++a)
      for (std::size_t b = 0; b < R; ++b)
        if (per_region[a] > 0 && per_region[b] > (a == b ? 1u : 0u)) {
          end = std::max(end, now_ + share / round.bandwidth[a][b] + round.latency[a][b]);
          lat = std::min(lat, round.latency[a][b]);
        }
    if (reps < 2)
      continue;
    double card_bytes = static_cast<double>(reps - 1) * share, card_least = 0;
    for (auto h : members) {
      auto& host = hosts_[h];
      double up = card_bytes / host.uplink_bytes_s, down = card_bytes / host.downlink_bytes_s;
      if (up > 0 || down > 0)
        avg.cards.push_back({h, up, down, lat});
      card_least = std::max({card_least, up, down});
    }
    avg.least = std::max({avg.least, card_least + lat, allreduce_lower_bound(some, full, [this](std::size_t a, std::size_t b) {
                                                                              return est(a, b);
                                                                            }, reps)});
  }
  if (s_.protocol_latency)
    avg.protocol_s = protocol_latency_s();
  avg.pair_end = std::max(end, link_free_.add(std::move(round))) + avg.protocol_s;
  round_least_ = avg.least;
  // Busy time that ended before this round can no longer matter (to this or a later one).
  for (auto* logs : {&up_busy_, &down_busy_})
    for (auto& log : *logs)
      while (!log.empty() && log.front().second <= now_)
        log.pop_front();
  averaging_ = std::move(avg);
  check_averaging();
}

// The runtime's averaging is a protocol of messages (docs/runtime.md, "The end of an
// iteration"), each a latency on the critical path beyond the transfers' own: the last data
// holder's ITERATION_DONE reaches every replica before it shares; the all-gather starts once
// the reduce-scatter's parts are in (a second latency inside a stage of 3 replicas or more:
// 2 exchange whole shares in one round); and every stage's NORM_SHARE reaches every host
// before it steps. Each is the longest such latency among the live hosts.
double engine::protocol_latency_s() const {
  // Live hosts per stage and region: the pairs by region (O(hosts + stages x regions^2)).
  auto R = net_.regions.size();
  std::vector<std::vector<int>> per(static_cast<std::size_t>(S()), std::vector<int>(R, 0));
  std::vector<int> members(static_cast<std::size_t>(S()), 0), all(R, 0), relays(R, 0);
  for (std::size_t h = 0; h < hosts_.size(); ++h) {
    int st = stage_of(h);
    if (!alive_[h] || st < 0 || st >= S())
      continue;
    ++per[static_cast<std::size_t>(st)][hosts_[h].region];
    ++members[static_cast<std::size_t>(st)];
    ++all[hosts_[h].region];
    relays[hosts_[h].region] += st > 0;
  }
  // The longest latency between two distinct hosts, one counted in `a`, one in `b` (per region).
  auto longest = [&](const std::vector<int>& a, const std::vector<int>& b, bool same_set) {
    double out = 0;
    for (std::size_t ra = 0; ra < R; ++ra)
      for (std::size_t rb = 0; rb < R; ++rb)
        if (a[ra] > 0 && b[rb] > (same_set && ra == rb ? 1 : 0))
          out = std::max(out, to_estimate(net_.link(ra, rb)).latency_s);
    return out;
  };
  double notify = longest(per[0], relays, false), norms = longest(all, all, true), within = 0;
  for (std::size_t st = 0; st < per.size(); ++st)
    if (members[st] >= 3)
      within = std::max(within, longest(per[st], per[st], true));
  return notify + within + norms;
}

void engine::check_averaging() {
  auto& avg = *averaging_;
  double end = avg.pair_end;
  for (auto& c : avg.cards) {
    if (c.up_s > 0)
      end = std::max(end, idle_end(up_busy_[c.host], avg.at, c.up_s) + c.latency_s + avg.protocol_s);
    if (c.down_s > 0)
      end = std::max(end, idle_end(down_busy_[c.host], avg.at, c.down_s) + c.latency_s + avg.protocol_s);
  }
  expect(end);
  if (end > now_) { // transfers that start before `end` are all queued by then
    at(end, [this] { check_averaging(); });
    return;
  }
  bool own = avg.iteration == iteration_; // sync, or the last iteration: it waits for this one
  averaging_.reset();
  if (own)
    end_iteration(true);
  else
    advance(); // overlap: the next one's microbatches may be done and waiting for it
}

// The proven lower bound on this iteration's microbatches (routing/bound.hpp) from every host
// that could work in it, on the links as they were when it started (links only degrade).
void engine::record_bound() {
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
                             auto &from = hosts_[ids[a]], &to = hosts_[ids[c]];
                             auto e = to_estimate(iter_net_.link(from.region, to.region));
                             e.bandwidth_bytes_s = std::min({e.bandwidth_bytes_s, from.uplink_bytes_s, to.downlink_bytes_s});
                             return e;
                           },
                           0); // the averaging's part is added when it has ended (end_iteration)
  res_.bound_iteration_s.push_back(b.seconds);
  res_.bound_s += b.seconds;
}

} // namespace gwtf::sim
