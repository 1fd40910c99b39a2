// ATOM's whole-model peers on the simulator's hosts, links and churn (docs/atom.md): every
// host trains the whole model on its own data, swapping what does not fit its memory, and the
// peers average their parameters once they processed `sync_every` global batches together.
// Nothing else uses the network, so a round is closed-form between its churn events.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>

#include "routing/cost_model.hpp"
#include "sim/simulator.hpp"

namespace gwtf::sim {

namespace {

constexpr double inf = std::numeric_limits<double>::infinity();

struct peer {
  bool alive = false;
  double ready = inf;     ///< from when it computes (a joiner: its download done)
  double rate = 0;        ///< microbatches/s it finishes (0: the model cannot run on it)
  double per_mb_s = 0;    ///< its compute alone, seconds a microbatch (the bound)
  double detected = 0;    ///< a crash: when the others know (the averaging waits until then)
};

/// An averaging under way: its members and what each contributed to its round.
struct averaging {
  std::map<std::size_t, double> members; ///< host -> microbatches it brought
  double end = 0;
};

class atom_run {
public:
  explicit atom_run(const sim_scenario& s) : s_(s), net_(s.net) {
    res_.router = sim_router::atom;
    hosts_ = s.hosts;
    trace_ = churn_trace(s);
    for (auto& e : trace_)
      if (e.kind == sim_event_kind::join)
        hosts_.push_back(e.joiner);
    peers_.resize(hosts_.size());
    for (std::size_t h = 0; h < s.hosts.size(); ++h)
      start_peer(h, 0);
    for (auto& h : s.hosts)
      holders_ += h.stage == 0;
  }

  sim_result run() {
    const int K = std::max(1, s_.atom.sync_every);
    const double G = static_cast<double>(holders_) * s_.microbatches_per_holder; // a global batch
    const int rounds = (s_.iterations + K - 1) / K;
    std::size_t next_event = 0;
    double t0 = 0, prev_len = 1.0;
    std::vector<std::pair<double, const sim_event*>> carried; // events past their round's part
    std::optional<averaging> open; // overlap: the last round's, while the next one computes
    for (int r = 0; r < rounds; ++r) {
      int batches = std::min(K, s_.iterations - r * K);
      double target = batches * G;
      // This round's events: gwtf iteration i falls in round i / K, at its share of the round
      // (a fraction of the previous round's length, as the engine places them).
      auto events = std::move(carried);
      carried.clear();
      for (; next_event < trace_.size() && trace_[next_event].iteration / K == r; ++next_event) {
        auto& e = trace_[next_event];
        double f = ((e.iteration % K) + e.at_fraction) / K;
        events.emplace_back(t0 + f * prev_len, &e);
      }
      std::stable_sort(events.begin(), events.end(), [](auto& a, auto& b) { return a.first < b.first; });
      // Each peer's even share of the round bounds its local step (at least one microbatch).
      std::size_t able = 0;
      step_share_ = inf; // whether a peer can train at all does not depend on its step
      for (std::size_t h = 0; h < peers_.size(); ++h) {
        set_rate(h);
        able += peers_[h].alive && peers_[h].rate > 0;
      }
      step_share_ = able > 0 ? target / static_cast<double>(able) : inf;
      for (std::size_t h = 0; h < peers_.size(); ++h)
        set_rate(h);
      std::size_t k = 0;
      std::map<std::size_t, double> alive_at_all; // host -> its per-microbatch compute (the bound)
      auto note_alive = [&] {
        for (std::size_t h = 0; h < peers_.size(); ++h)
          if (peers_[h].alive && peers_[h].rate > 0)
            alive_at_all[h] = peers_[h].per_mb_s;
      };
      note_alive();
      double T = inf;
      for (;;) {
        T = finish_time(t0, target);
        if (k < events.size() && events[k].first < T) {
          apply(*events[k].second, std::max(t0, events[k].first), t0, open);
          note_alive();
          ++k;
          continue;
        }
        break;
      }
      if (!std::isfinite(T)) {
        res_.why = "round " + std::to_string(r) + ": no peer left that can hold the model";
        return finish(false);
      }
      // What each peer brought, and its busy time (compute seconds).
      averaging avg;
      for (std::size_t h = 0; h < peers_.size(); ++h) {
        auto& p = peers_[h];
        if (!p.alive || p.rate <= 0 || p.ready >= T)
          continue;
        double busy = T - std::max(t0, p.ready);
        avg.members[h] = p.rate * busy;
        res_.compute_s += busy;
      }
      double rate_bound = 0;
      for (auto& [h, c] : alive_at_all)
        rate_bound += 1 / c;
      // The last averaging must have ended (overlap), and every crash be known: the
      // all-reduce waits for a silent member until its detection.
      double start = T;
      if (open) {
        start = std::max(start, open->end);
        close(*open);
        open.reset();
      }
      for (auto& p : peers_)
        if (!p.alive && p.detected > start && p.detected - s_.detect_s < T)
          start = std::max(start, p.detected);
      avg.end = start + allreduce_s(avg.members);
      bool sync = s_.averaging == model::averaging_mode::sync || r + 1 == rounds;
      // sync: the peers wait for the average; what happens meanwhile hits it. overlap: the
      // next round computes meanwhile and its events hit both.
      std::optional<averaging> now{std::move(avg)};
      for (; k < events.size(); ++k) {
        if (!sync || events[k].first >= now->end) {
          carried.assign(events.begin() + static_cast<std::ptrdiff_t>(k), events.end());
          break;
        }
        apply(*events[k].second, std::max(T, events[k].first), T, now, false);
      }
      res_.flows.push_back(static_cast<int>(now->members.size()));
      res_.bound_iteration_s.push_back(target / rate_bound);
      res_.bound_s += target / rate_bound;
      if (sync) {
        close(*now);
        res_.aggregation_s.push_back(now->end - T);
        res_.iteration_s.push_back(now->end - t0);
        res_.iteration_end_s.push_back(now->end);
        prev_len = now->end - t0;
        t0 = now->end;
      } else {
        // The next round computes on the weights before this average, which lands one round
        // late (hivemind's delayed step); the next averaging starts after it.
        res_.aggregation_s.push_back(0);
        res_.iteration_s.push_back(T - t0);
        res_.iteration_end_s.push_back(T);
        prev_len = T - t0;
        t0 = T;
        open = std::move(now);
      }
    }
    res_.total_s = res_.iteration_end_s.empty() ? 0 : res_.iteration_end_s.back();
    return finish(true);
  }

private:
  // The peer's step: its compute, or its swapping where that is slower (ATOM loads block
  // k + 1 while block k computes); a model whose activations and two blocks do not fit
  // cannot run there (set_rate).
  void start_peer(std::size_t h, double ready) {
    auto& p = peers_[h];
    p.alive = true;
    p.ready = ready;
    p.per_mb_s = hosts_[h].model_compute_s;
    set_rate(h);
  }

  // A local step is `local_microbatches`, or the peer's even share of the round when that is
  // less (its swapping then passes the blocks once for fewer microbatches). The peer keeps
  // every activation, or rematerialises (a forward more, 4/3 of the compute, for far less
  // activation memory), whichever steps faster in its memory.
  void set_rate(std::size_t h) {
    auto& host = hosts_[h];
    auto& p = peers_[h];
    double L = std::max(1.0, std::min<double>(s_.atom.local_microbatches, step_share_));
    auto step_with = [&](double activations, double compute_factor) {
      double step = L * host.model_compute_s * compute_factor;
      double need = s_.atom.state_bytes + activations;
      if (need <= host.memory_bytes)
        return step;
      if (host.memory_bytes < activations + 2 * s_.atom.block_state_bytes)
        return inf; // not even one microbatch's activations and two blocks (computing, loading)
      // What is not resident goes in and out once a local step (forward, then backward with
      // each block's optimizer step as it passes), plus the first block's load.
      double swapped = need - host.memory_bytes;
      return std::max(step, 2 * swapped / host.swap_bytes_s) + s_.atom.block_state_bytes / host.swap_bytes_s;
    };
    double step = std::min(step_with(s_.atom.activation_bytes, 1.0), step_with(s_.atom.remat_activation_bytes, 4.0 / 3));
    p.rate = !std::isfinite(step) ? 0 : step > 0 ? L / step : inf;
  }

  // When the live peers together reach `target` microbatches from t0 (inf: never).
  double finish_time(double t0, double target) const {
    std::vector<std::pair<double, double>> starts; // from, rate
    for (auto& p : peers_)
      if (p.alive && p.rate > 0 && std::isfinite(p.ready))
        starts.emplace_back(std::max(t0, p.ready), p.rate);
    std::sort(starts.begin(), starts.end());
    double done = 0, rate = 0, t = t0;
    for (std::size_t i = 0; i <= starts.size(); ++i) {
      double next = i < starts.size() ? starts[i].first : inf;
      if (rate > 0 && done + rate * (next - t) >= target)
        return t + (target - done) / rate;
      if (!std::isfinite(next))
        return inf;
      done += rate * (next - t);
      t = next;
      rate += starts[i].second;
    }
    return inf;
  }

  routing::link_estimate link(std::size_t a, std::size_t b) const {
    auto e = routing::to_estimate(net_.link(hosts_[a].region, hosts_[b].region));
    e.bandwidth_bytes_s = std::min({e.bandwidth_bytes_s, hosts_[a].uplink_bytes_s, hosts_[b].downlink_bytes_s});
    return e;
  }

  // The members' butterfly all-reduce of their parameters, as the stages' (docs/simulator.md):
  // each sends 2/n of the model to every other member over their link at once, and its card
  // carries 2 (n - 1)/n of it.
  double allreduce_s(const std::map<std::size_t, double>& members) const {
    auto n = members.size();
    if (n < 2)
      return 0;
    // The pairs by region: O(members + regions^2), as the stages' averaging.
    std::vector<std::size_t> per_region(net_.regions.size(), 0);
    for (auto& [h, c] : members)
      ++per_region[hosts_[h].region];
    double share = 2 * s_.atom.average_bytes / static_cast<double>(n), end = 0, least_latency = inf;
    for (std::size_t a = 0; a < per_region.size(); ++a)
      for (std::size_t b = 0; b < per_region.size(); ++b)
        if (per_region[a] > 0 && per_region[b] > (a == b ? 1u : 0u)) {
          auto e = routing::to_estimate(net_.link(a, b));
          end = std::max(end, share / e.bandwidth_bytes_s + e.latency_s);
          least_latency = std::min(least_latency, e.latency_s);
        }
    double card = static_cast<double>(n - 1) * share;
    for (auto& [h, c] : members)
      end = std::max(end, card / std::min(hosts_[h].uplink_bytes_s, hosts_[h].downlink_bytes_s) + least_latency);
    return end;
  }

  // A joiner downloads the current average from the live peer with the fastest path.
  double download_s(std::size_t j) const {
    double best = inf;
    for (std::size_t h = 0; h < peers_.size(); ++h)
      if (h != j && peers_[h].alive && peers_[h].rate > 0) {
        auto e = link(h, j);
        best = std::min(best, e.latency_s + s_.atom.download_bytes / e.bandwidth_bytes_s);
      }
    return best;
  }

  // `e` at time t. A crash or leave takes the peer's work of the round (t0 on) with it, and
  // out of `avg` (the averaging under way, which then starts again without it once the
  // crash is detected). `computing`: the peers are in the round's compute.
  void apply(const sim_event& e, double t, double t0, std::optional<averaging>& avg, bool computing = true) {
    switch (e.kind) {
      case sim_event_kind::crash:
      case sim_event_kind::leave: {
        auto& p = peers_[e.host];
        if (!p.alive)
          return;
        ++(e.kind == sim_event_kind::crash ? res_.crashes : res_.leaves);
        res_.crash_times_s.push_back(t);
        p.alive = false;
        p.detected = t + (e.kind == sim_event_kind::crash ? s_.detect_s : 0);
        if (computing && p.rate > 0 && p.ready < t) {
          double busy = t - std::max(t0, p.ready);
          res_.wasted_s += busy;
          res_.compute_s += busy;
        }
        if (avg && t < avg->end) {
          auto m = avg->members.find(e.host);
          if (m != avg->members.end()) {
            // Its round's work is lost with it; the others average again without it.
            res_.wasted_s += m->second / std::max(p.rate, 1e-300);
            avg->members.erase(m);
            avg->end = p.detected + allreduce_s(avg->members);
          }
        }
        return;
      }
      case sim_event_kind::join: {
        auto j = e.host; // the scenario's hosts, then the joiners in trace order
        if (j >= peers_.size())
          return;
        double dl = download_s(j);
        start_peer(j, std::isfinite(dl) ? t + dl : inf);
        if (std::isfinite(dl)) {
          ++res_.joins;
          res_.join_times_s.push_back(t + dl);
        }
        return;
      }
      case sim_event_kind::degrade:
        ++res_.degrades;
        degrade_links(net_, e);
        return;
    }
  }

  void close(const averaging& a) {
    for (auto& [h, c] : a.members)
      counted_ += c;
  }

  sim_result finish(bool completed) {
    res_.completed = completed;
    res_.microbatches = static_cast<std::int64_t>(std::llround(counted_));
    return res_;
  }

  const sim_scenario& s_;
  network_matrix net_;
  std::vector<sim_host> hosts_; ///< the scenario's, then the joiners in trace order
  std::vector<peer> peers_;
  std::vector<sim_event> trace_;
  int holders_ = 0;
  double step_share_ = inf; ///< this round's microbatches per peer able to train
  double counted_ = 0;
  sim_result res_;
};

} // namespace

sim_result simulate_atom(const sim_scenario& s) {
  return atom_run{s}.run();
}

} // namespace gwtf::sim
