#include "routing/bound.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

namespace gwtf::routing {

namespace {

constexpr double inf = std::numeric_limits<double>::infinity();

double transfer_s(const link_estimate& e, double bytes) {
  if (!(e.bandwidth_bytes_s > 0))
    return inf;
  return e.latency_s + bytes / e.bandwidth_bytes_s;
}

} // namespace

double stage_rate_bound(const std::vector<bound_host>& stage_hosts, double downstream_s) {
  if (stage_hosts.empty())
    return 0;
  // Per unit of time: a host h finishes at most 1/c_h microbatches (compute), and at most
  // cap_h / (c_h + D) of them with the activations stashed on it (Little's law: each holds a
  // slot from its forward until its backward, and the gradient cannot come back sooner
  // than the fastest possible downstream round trip D). The rest ran their backward without
  // the stash and paid a second forward somewhere in the stage, at least c_min / 3. The
  // per-host compute limits are relaxed into one budget for the stage (|H| per unit of
  // time), which only raises the rate: the fractional knapsack below is exact for it.
  double c_min = inf;
  for (auto& h : stage_hosts)
    c_min = std::min(c_min, h.compute_s);
  if (!(c_min > 0))
    return inf; // free compute: no finite time bound from this stage
  double rate = 0;
  double budget = static_cast<double>(stage_hosts.size());
  std::vector<std::pair<double, double>> rest; // (cost per microbatch, room), cheapest first
  for (auto& h : stage_hosts) {
    double compute_cap = 1 / h.compute_s;
    double stash = std::isfinite(downstream_s) ? std::max(0, h.capacity) / (h.compute_s + downstream_s) : 0.0;
    double a = std::min(compute_cap, stash);
    rate += a;
    budget -= a * h.compute_s;
    if (compute_cap > a)
      rest.emplace_back(h.compute_s + c_min / 3, compute_cap - a);
  }
  std::sort(rest.begin(), rest.end());
  for (auto& [cost, room] : rest) {
    if (budget <= 0)
      break;
    double x = std::min(room, budget / cost);
    rate += x;
    budget -= x * cost;
  }
  return rate;
}

double allreduce_lower_bound(const std::vector<std::size_t>& replicas, double gradient_bytes,
                             const bound_link_fn& link, std::size_t count) {
  if (count == 0)
    count = replicas.size();
  if (replicas.size() < 2 || count < 2)
    return 0;
  double share = 2 * gradient_bytes / static_cast<double>(count);
  double worst = 0;
  for (auto a : replicas)
    for (auto b : replicas)
      if (a != b)
        worst = std::max(worst, transfer_s(link(a, b), share));
  return worst;
}

iteration_bound bound_iteration(const std::vector<bound_host>& hosts, int stages, int microbatches_per_holder,
                                double activation_bytes, const bound_link_fn& link, double allreduce_s) {
  iteration_bound out;
  out.allreduce_s = allreduce_s;
  if (stages < 2 || microbatches_per_holder <= 0) {
    out.seconds = allreduce_s;
    return out;
  }
  auto S = static_cast<std::size_t>(stages);
  std::vector<std::vector<std::size_t>> at(S);
  for (std::size_t k = 0; k < hosts.size(); ++k)
    if (hosts[k].stage >= 0 && hosts[k].stage < stages)
      at[static_cast<std::size_t>(hosts[k].stage)].push_back(k);
  int holders = static_cast<int>(at[0].size());
  if (holders == 0) {
    out.seconds = allreduce_s;
    return out;
  }
  std::vector<double> c_min(S, inf);
  for (std::size_t s = 0; s < S; ++s)
    for (auto k : at[s])
      c_min[s] = std::min(c_min[s], hosts[k].compute_s);
  // Fastest activation transfer across each stage boundary k -> k+1 (mod S), both ways.
  std::vector<double> fwd(S, inf), bwd(S, inf);
  // One host per group and stage is enough: links depend on the group only.
  std::vector<std::vector<std::size_t>> reps(S);
  for (std::size_t s = 0; s < S; ++s) {
    std::set<std::int64_t> seen;
    for (auto k : at[s])
      if (hosts[k].group < 0 || seen.insert(hosts[k].group).second)
        reps[s].push_back(k);
  }
  for (std::size_t k = 0; k < S; ++k)
    for (auto a : reps[k])
      for (auto b : reps[(k + 1) % S])
        if (a != b) {
          fwd[k] = std::min(fwd[k], transfer_s(link(a, b), activation_bytes));
          bwd[k] = std::min(bwd[k], transfer_s(link(b, a), activation_bytes));
        }
  // downstream[s]: the least time from the end of a forward at stage s until its gradient
  // is back there: every later boundary crossed both ways, every later relay stage's
  // forward and backward, the head at a data holder.
  std::vector<double> downstream(S + 1, 0.0);
  downstream[S] = c_min[0];
  for (std::size_t s = S; s-- > 0;) {
    double below = s + 1 < S ? c_min[s + 1] : 0.0; // stage s+1's compute (the head is in downstream[S])
    downstream[s] = fwd[s] + bwd[s] + below + downstream[s + 1];
  }
  out.ring_s = downstream[0];
  int m_total = holders * microbatches_per_holder;
  for (auto k : at[0])
    out.holder_s = std::max(out.holder_s, microbatches_per_holder * hosts[k].compute_s);
  for (std::size_t s = 1; s < S; ++s) {
    std::vector<bound_host> stage_hosts;
    for (auto k : at[s])
      stage_hosts.push_back(hosts[k]);
    double rate = stage_rate_bound(stage_hosts, downstream[s]);
    double t = rate > 0 ? m_total / rate : inf;
    if (t > out.stage_s || out.limiting_stage < 0) {
      out.stage_s = t;
      out.limiting_stage = static_cast<int>(s);
    }
  }
  out.seconds = std::max({out.ring_s, out.holder_s, out.stage_s}) + allreduce_s;
  return out;
}

} // namespace gwtf::routing
