#include "routing/dtfm.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <random>
#include <stdexcept>

namespace gwtf::routing {

namespace {

constexpr double inf = std::numeric_limits<double>::infinity();

// Seconds to move `bytes` between two regions, the mean of both directions (DT-FM's model is
// symmetric: activations go one way, their gradients the other).
double transfer_s(const network_matrix& net, std::size_t a, std::size_t b, double bytes) {
  auto one = [&](std::size_t x, std::size_t y) {
    auto l = net.link(x, y);
    double bw = l.bandwidth_mbps > 0 ? l.bandwidth_mbps * 1e6 : 1e-9;
    return l.latency_ms / 1000.0 + bytes * 8.0 / bw;
  };
  return (one(a, b) + one(b, a)) / 2;
}

// The mean cost of the best matching between two groups of regions.
double matching_s(const network_matrix& net, const std::vector<std::size_t>& a, const std::vector<std::size_t>& b,
                  double bytes) {
  if (a.empty() || b.empty())
    return 0;
  const auto& rows = a.size() <= b.size() ? a : b;
  const auto& cols = a.size() <= b.size() ? b : a;
  // Hosts of one region are interchangeable: the assignment is a transportation problem
  // between the regions' counts (the same optimum, at the cost of the regions, not the hosts).
  auto regions = net.regions.size();
  for (auto r : rows)
    regions = std::max(regions, r + 1);
  for (auto r : cols)
    regions = std::max(regions, r + 1);
  std::vector<std::size_t> supply(regions, 0), room(regions, 0);
  for (auto r : rows)
    ++supply[r];
  for (auto r : cols)
    ++room[r];
  std::vector<std::vector<double>> c(regions, std::vector<double>(regions, 0));
  for (std::size_t r = 0; r < regions; ++r)
    for (std::size_t q = 0; q < regions; ++q)
      if (supply[r] > 0 && room[q] > 0)
        c[r][q] = transfer_s(net, r, q, bytes);
  return min_cost_transport(supply, room, c).cost / static_cast<double>(rows.size());
}

// The best ring H -> g_pi(1) -> ... -> g_pi(k) -> H over the groups: Held-Karp up to 12
// groups, nearest neighbour beyond.
double best_path_s(const std::vector<double>& from_holders, const std::vector<std::vector<double>>& between) {
  auto k = from_holders.size();
  if (k == 0)
    return 0;
  if (k <= 12) {
    std::size_t full = (std::size_t{1} << k) - 1;
    std::vector<std::vector<double>> dp(full + 1, std::vector<double>(k, inf));
    for (std::size_t g = 0; g < k; ++g)
      dp[std::size_t{1} << g][g] = from_holders[g];
    for (std::size_t mask = 1; mask <= full; ++mask)
      for (std::size_t last = 0; last < k; ++last) {
        if (!(mask >> last & 1u) || dp[mask][last] == inf)
          continue;
        for (std::size_t next = 0; next < k; ++next)
          if (!(mask >> next & 1u)) {
            auto m = mask | (std::size_t{1} << next);
            dp[m][next] = std::min(dp[m][next], dp[mask][last] + between[last][next]);
          }
      }
    double best = inf;
    for (std::size_t last = 0; last < k; ++last)
      best = std::min(best, dp[full][last] + from_holders[last]);
    return best;
  }
  std::vector<bool> used(k, false);
  auto cur = static_cast<std::size_t>(std::min_element(from_holders.begin(), from_holders.end()) - from_holders.begin());
  double total = from_holders[cur];
  used[cur] = true;
  for (std::size_t step = 1; step < k; ++step) {
    std::size_t best = k;
    for (std::size_t g = 0; g < k; ++g)
      if (!used[g] && (best == k || between[cur][g] < between[cur][best]))
        best = g;
    total += between[cur][best];
    used[best] = true;
    cur = best;
  }
  return total + from_holders[cur];
}

// Balanced group sizes: the first n % k groups hold one more.
std::vector<std::size_t> group_sizes(std::size_t n, std::size_t k) {
  std::vector<std::size_t> sizes(k, n / k);
  for (std::size_t g = 0; g < n % k; ++g)
    ++sizes[g];
  return sizes;
}

std::vector<int> decode(const std::vector<std::size_t>& perm, const std::vector<std::size_t>& sizes) {
  std::vector<int> stage(perm.size(), 0);
  std::size_t at = 0;
  for (std::size_t g = 0; g < sizes.size(); ++g)
    for (std::size_t i = 0; i < sizes[g]; ++i)
      stage[perm[at++]] = static_cast<int>(g) + 1;
  return stage;
}

bool balanced(const std::vector<int>& stage, int k) {
  std::vector<std::size_t> count(static_cast<std::size_t>(k) + 1, 0);
  for (int s : stage) {
    if (s < 1 || s > k)
      return false;
    ++count[static_cast<std::size_t>(s)];
  }
  auto [lo, hi] = std::minmax_element(count.begin() + 1, count.end());
  return *lo >= 1 && *hi - *lo <= 1;
}

} // namespace

std::vector<std::size_t> min_cost_assignment(const std::vector<std::vector<double>>& cost) {
  // Hungarian algorithm with potentials (1-based inside), rows <= cols.
  std::size_t n = cost.size();
  if (n == 0)
    return {};
  std::size_t m = cost.front().size();
  if (m < n)
    throw std::invalid_argument("min_cost_assignment: more rows than columns");
  std::vector<double> u(n + 1, 0), v(m + 1, 0);
  std::vector<std::size_t> p(m + 1, 0), way(m + 1, 0);
  for (std::size_t i = 1; i <= n; ++i) {
    p[0] = i;
    std::size_t j0 = 0;
    std::vector<double> minv(m + 1, inf);
    std::vector<bool> used(m + 1, false);
    do {
      used[j0] = true;
      std::size_t i0 = p[j0], j1 = 0;
      double delta = inf;
      for (std::size_t j = 1; j <= m; ++j)
        if (!used[j]) {
          double cur = cost[i0 - 1][j - 1] - u[i0] - v[j];
          if (cur < minv[j]) {
            minv[j] = cur;
            way[j] = j0;
          }
          if (minv[j] < delta) {
            delta = minv[j];
            j1 = j;
          }
        }
      for (std::size_t j = 0; j <= m; ++j)
        if (used[j]) {
          u[p[j]] += delta;
          v[j] -= delta;
        } else {
          minv[j] -= delta;
        }
      j0 = j1;
    } while (p[j0] != 0);
    do {
      std::size_t j1 = way[j0];
      p[j0] = p[j1];
      j0 = j1;
    } while (j0 != 0);
  }
  std::vector<std::size_t> out(n, 0);
  for (std::size_t j = 1; j <= m; ++j)
    if (p[j] != 0)
      out[p[j] - 1] = j - 1;
  return out;
}

min_transport min_cost_transport(const std::vector<std::size_t>& supply, const std::vector<std::size_t>& room,
                                 const std::vector<std::vector<double>>& cost) {
  // Successive shortest paths (Bellman-Ford on the residual graph) over source -> row r
  // (supply[r]) -> column q (unbounded, cost[r][q]) -> sink (room[q]).
  auto R = supply.size(), Q = room.size();
  std::size_t need = std::accumulate(supply.begin(), supply.end(), std::size_t{0});
  if (need > std::accumulate(room.begin(), room.end(), std::size_t{0}))
    throw std::invalid_argument("min_cost_transport: more supply than room");
  if (cost.size() != R)
    throw std::invalid_argument("min_cost_transport: cost rows != supply size");
  for (auto& row : cost)
    if (row.size() != Q)
      throw std::invalid_argument("min_cost_transport: cost columns != room size");
  min_transport out;
  out.flow.assign(R, std::vector<std::size_t>(Q, 0));
  std::vector<std::size_t> sent(R, 0), used(Q, 0);
  double scale = 1;
  for (auto& row : cost)
    for (double c : row)
      scale = std::max(scale, std::abs(c));
  const double eps = 1e-12 * scale; // improvements below rounding do not count (no FP cycles)
  // Nodes: rows 0..R-1, columns R..R+Q-1; the source reaches rows with supply left, columns
  // with room left reach the sink.
  auto N = R + Q;
  while (need > 0) {
    std::vector<double> dist(N, inf);
    std::vector<std::ptrdiff_t> from(N, -1);
    for (std::size_t r = 0; r < R; ++r)
      if (sent[r] < supply[r])
        dist[r] = 0;
    for (std::size_t pass = 0; pass < N; ++pass) {
      bool changed = false;
      for (std::size_t r = 0; r < R; ++r)
        for (std::size_t q = 0; q < Q; ++q) {
          auto col = R + q;
          if (dist[r] < inf && dist[r] + cost[r][q] < dist[col] - eps) { // forward: unbounded
            dist[col] = dist[r] + cost[r][q];
            from[col] = static_cast<std::ptrdiff_t>(r);
            changed = true;
          }
          if (out.flow[r][q] > 0 && dist[col] < inf && dist[col] - cost[r][q] < dist[r] - eps) { // undo
            dist[r] = dist[col] - cost[r][q];
            from[r] = static_cast<std::ptrdiff_t>(col);
            changed = true;
          }
        }
      if (!changed)
        break;
    }
    std::ptrdiff_t end = -1;
    for (std::size_t q = 0; q < Q; ++q)
      if (used[q] < room[q] && dist[R + q] < inf && (end < 0 || dist[R + q] < dist[static_cast<std::size_t>(end)]))
        end = static_cast<std::ptrdiff_t>(R + q);
    if (end < 0)
      throw std::logic_error("min_cost_transport: no augmenting path");
    // The path back to its row, and how much it can carry.
    std::vector<std::size_t> path{static_cast<std::size_t>(end)};
    while (from[path.back()] >= 0) {
      path.push_back(static_cast<std::size_t>(from[path.back()]));
      if (path.size() > N + 1)
        throw std::logic_error("min_cost_transport: a cycle in the shortest paths");
    }
    auto start = path.back();
    std::size_t amount = std::min({need, supply[start] - sent[start], room[static_cast<std::size_t>(end) - R] - used[static_cast<std::size_t>(end) - R]});
    for (std::size_t k = path.size() - 1; k > 0; --k) {
      auto u = path[k], v = path[k - 1];
      if (u >= R) // column -> row: undoes flow on (v, u)
        amount = std::min(amount, out.flow[v][u - R]);
    }
    for (std::size_t k = path.size() - 1; k > 0; --k) {
      auto u = path[k], v = path[k - 1];
      if (u < R)
        out.flow[u][v - R] += amount;
      else
        out.flow[v][u - R] -= amount;
    }
    sent[start] += amount;
    used[static_cast<std::size_t>(end) - R] += amount;
    need -= amount;
  }
  for (std::size_t r = 0; r < R; ++r)
    for (std::size_t q = 0; q < Q; ++q)
      out.cost += static_cast<double>(out.flow[r][q]) * cost[r][q];
  return out;
}

dtfm_placement dtfm_cost(const dtfm_problem& p, const std::vector<int>& stage) {
  auto k = static_cast<std::size_t>(p.relay_stages);
  std::vector<std::vector<std::size_t>> groups(k);
  for (std::size_t i = 0; i < stage.size(); ++i)
    groups.at(static_cast<std::size_t>(stage[i] - 1)).push_back(p.relays[i]);
  dtfm_placement out;
  out.stage = stage;
  for (auto& g : groups) {
    if (g.empty())
      throw std::invalid_argument("dtfm_cost: an empty group");
    auto size = static_cast<double>(g.size());
    // A member's all-reduce depends on its region only: one sum per region present.
    std::map<std::size_t, std::size_t> in; // region -> members
    for (auto r : g)
      ++in[r];
    for (auto& [r, n] : in) {
      double member = 0;
      for (auto& [q, m] : in)
        member += 2 * transfer_s(*p.net, r, q, p.gradient_bytes / size) * static_cast<double>(q == r ? m - 1 : m);
      out.data_parallel_s = std::max(out.data_parallel_s, member);
    }
  }
  std::vector<double> from_holders(k);
  std::vector<std::vector<double>> between(k, std::vector<double>(k, 0));
  for (std::size_t a = 0; a < k; ++a) {
    from_holders[a] = matching_s(*p.net, p.holders, groups[a], p.activation_bytes);
    for (std::size_t b = a + 1; b < k; ++b)
      between[a][b] = between[b][a] = matching_s(*p.net, groups[a], groups[b], p.activation_bytes);
  }
  out.pipeline_s = best_path_s(from_holders, between);
  out.cost = out.data_parallel_s + 2 * out.pipeline_s;
  return out;
}

dtfm_search dtfm_place(const dtfm_problem& p, const dtfm_options& opts) {
  auto n = p.relays.size();
  auto k = static_cast<std::size_t>(p.relay_stages);
  if (k == 0 || n < k)
    throw std::invalid_argument("dtfm_place: needs at least one relay per relay stage");
  auto sizes = group_sizes(n, k);
  std::mt19937_64 rng{opts.seed};
  dtfm_search out;
  struct individual {
    std::vector<std::size_t> perm;
    dtfm_placement placed;
  };
  auto evaluate = [&](std::vector<std::size_t> perm) {
    ++out.evaluations;
    auto placed = dtfm_cost(p, decode(perm, sizes));
    return individual{std::move(perm), std::move(placed)};
  };
  // Greedy: relays sorted by region, so that co-located hosts share a group.
  std::vector<std::size_t> greedy(n);
  std::iota(greedy.begin(), greedy.end(), 0);
  std::stable_sort(greedy.begin(), greedy.end(), [&](std::size_t a, std::size_t b) { return p.relays[a] < p.relays[b]; });
  std::vector<individual> pop;
  pop.push_back(evaluate(greedy));
  out.greedy = pop.front().placed;
  auto population = static_cast<std::size_t>(std::max(2, opts.population));
  while (pop.size() < population) {
    auto perm = greedy;
    std::shuffle(perm.begin(), perm.end(), rng);
    pop.push_back(evaluate(std::move(perm)));
  }
  auto by_cost = [](const individual& a, const individual& b) { return a.placed.cost < b.placed.cost; };
  std::uniform_int_distribution<std::size_t> pick(0, n - 1);
  auto tournament = [&]() -> const individual& {
    std::uniform_int_distribution<std::size_t> any(0, pop.size() - 1);
    const individual* best = &pop[any(rng)];
    for (int t = 0; t < 2; ++t) {
      auto& c = pop[any(rng)];
      if (c.placed.cost < best->placed.cost)
        best = &c;
    }
    return *best;
  };
  for (int gen = 0; gen < opts.generations; ++gen) {
    std::sort(pop.begin(), pop.end(), by_cost);
    std::vector<individual> next(pop.begin(), pop.begin() + 2); // elitism: the best never gets worse
    while (next.size() < population) {
      auto& a = tournament();
      auto& b = tournament();
      // Multi-point order crossover: two segments of a kept in place, the rest in b's order.
      std::vector<bool> from_a(n, false);
      for (int seg = 0; seg < 2; ++seg) {
        auto x = pick(rng), y = pick(rng);
        if (x > y)
          std::swap(x, y);
        for (auto i = x; i <= y && i < x + n / 3 + 1; ++i)
          from_a[i] = true;
      }
      std::vector<std::size_t> child(n);
      std::vector<bool> taken(n, false);
      for (std::size_t i = 0; i < n; ++i)
        if (from_a[i]) {
          child[i] = a.perm[i];
          taken[a.perm[i]] = true;
        }
      std::size_t fill = 0;
      for (std::size_t i = 0; i < n; ++i) {
        if (from_a[i])
          continue;
        while (taken[b.perm[fill]])
          ++fill;
        child[i] = b.perm[fill];
        taken[b.perm[fill]] = true;
      }
      if (std::uniform_real_distribution<double>(0, 1)(rng) < 0.3) // mutation: swap two hosts
        std::swap(child[pick(rng)], child[pick(rng)]);
      next.push_back(evaluate(std::move(child)));
    }
    pop = std::move(next);
  }
  auto best = *std::min_element(pop.begin(), pop.end(), by_cost);
  // Local search: swap two hosts of different groups, or move one from a larger group to a
  // smaller one (sizes stay balanced); first improvement, a few passes.
  auto stage = best.placed.stage;
  auto current = best.placed;
  bool improved = false;
  // Keeps the change just made to `stage` if it lowers the cost, else undoes it.
  auto keep_if_better = [&](const auto& undo) {
    ++out.evaluations;
    auto c = dtfm_cost(p, stage);
    if (c.cost < current.cost - 1e-12) {
      current = std::move(c);
      improved = true;
    } else {
      undo();
    }
  };
  for (int round = 0; round < opts.local_search_rounds; ++round) {
    improved = false;
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t j = i + 1; j < n; ++j) {
        if (stage[i] == stage[j] || out.evaluations >= opts.max_evaluations)
          continue;
        std::swap(stage[i], stage[j]);
        keep_if_better([&] { std::swap(stage[i], stage[j]); });
      }
    if (n % k != 0)
      for (std::size_t i = 0; i < n; ++i)
        for (int g = 1; g <= static_cast<int>(k); ++g) {
          if (g == stage[i] || out.evaluations >= opts.max_evaluations)
            continue;
          auto before = stage[i];
          stage[i] = g;
          if (balanced(stage, static_cast<int>(k)))
            keep_if_better([&] { stage[i] = before; });
          else
            stage[i] = before;
        }
    if (!improved)
      break;
  }
  out.best = current.cost <= out.greedy.cost ? current : out.greedy;
  return out;
}

std::vector<int> dtfm_stages(const network_matrix& net, const dtfm_request& r) {
  dtfm_problem p;
  p.net = &net;
  p.relay_stages = r.relay_stages;
  p.activation_bytes = r.activation_bytes;
  p.gradient_bytes = r.gradient_bytes;
  for (auto* names : {&r.holder_regions, &r.relay_regions})
    for (auto& name : *names) {
      auto idx = net.region_index(name);
      if (!idx)
        return {};
      (names == &r.holder_regions ? p.holders : p.relays).push_back(*idx);
    }
  if (r.relay_stages < 1 || p.relays.size() < static_cast<std::size_t>(r.relay_stages))
    return {};
  dtfm_options o;
  o.seed = r.seed;
  return dtfm_place(p, o).best.stage;
}

dtfm_placement dtfm_exhaustive(const dtfm_problem& p) {
  auto n = p.relays.size();
  auto k = p.relay_stages;
  dtfm_placement best;
  best.cost = inf;
  std::vector<int> stage(n, 1);
  for (;;) {
    if (balanced(stage, k)) {
      auto c = dtfm_cost(p, stage);
      if (c.cost < best.cost)
        best = std::move(c);
    }
    std::size_t i = 0; // next assignment, counting in base k
    while (i < n && stage[i] == k)
      stage[i++] = 1;
    if (i == n)
      break;
    ++stage[i];
  }
  return best;
}

} // namespace gwtf::routing
