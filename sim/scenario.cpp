#include "sim/scenario.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <random>
#include <set>

#include "common/seeded.hpp"
#include "model/partition.hpp"
#include "model/sizing.hpp"
#include "routing/placement.hpp"

namespace gwtf::sim {

namespace {

/// [value] or [min, max] with min <= max, each in [lo, hi].
template <class T>
void check_range(const issue_sink& report, const std::string& key, const std::vector<T>& v, double lo,
                 double hi, const char* what) {
  if (v.empty() || v.size() > 2) {
    report(key, std::string{"[value] or [min, max] of "} + what + ", got " + std::to_string(v.size())
                  + " values");
    return;
  }
  for (std::size_t i = 0; i < v.size(); ++i)
    check_real(report, key + "[" + std::to_string(i) + "]", static_cast<double>(v[i]), lo, bound::closed,
               hi, bound::closed, what);
  if (v.size() == 2 && v[0] > v[1])
    report(key, "[min, max] with min <= max, got [" + format_number(static_cast<double>(v[0])) + ", "
                  + format_number(static_cast<double>(v[1])) + "]");
}


// A network card's limit in bytes/s (0 Mbit/s: none).
double nic_bytes_s(double mbit) {
  return mbit > 0 ? mbit * 1e6 / 8 : std::numeric_limits<double>::infinity();
}

double draw(const std::vector<double>& r, double u) {
  return r.size() == 1 ? r[0] : r[0] + (r[1] - r[0]) * u;
}

int draw(const std::vector<int>& r, double u) {
  if (r.size() == 1)
    return r[0];
  auto span = static_cast<double>(r[1] - r[0] + 1);
  return r[0] + std::min(static_cast<int>(u * span), r[1] - r[0]);
}

} // namespace

void sim_model_config::validate(const issue_sink& report) const {
  check_int(report, "layers", layers, 1, 100000, "transformer blocks");
  check_int(report, "hidden", hidden, 1, 1 << 20, "a model width");
  check_int(report, "ffn_hidden", ffn_hidden, 0, 1 << 22, "an MLP width (0: the family's default)");
  check_int(report, "seq_len", seq_len, 1, 1 << 24, "tokens per sequence");
  check_int(report, "microbatch_size", microbatch_size, 1, 1 << 16, "sequences per microbatch");
  check_int(report, "vocab", vocab, 1, 1 << 24, "a vocabulary size");
  check_int(report, "stages", stages, 2, 1024, "pipeline stages (data holders' stage 0 included)");
  check_int(report, "bytes_per_value", bytes_per_value, 1, 8, "bytes per activation value");
  check_real(report, "download_bytes_per_param", download_bytes_per_param, 0, bound::closed, 64,
             bound::closed, "bytes per parameter");
  if (stages >= 2 && layers >= 1 && layers % (stages - 1) != 0)
    report("layers", "a multiple of the relay stages (stages - 1 = " + std::to_string(stages - 1)
                       + ") so that every relay stage holds as many blocks, got " + std::to_string(layers));
}

model::model_config sim_model_config::shape() const {
  model::model_config m;
  m.arch = arch;
  m.layers = layers;
  m.hidden = hidden;
  m.heads = 1; // the sizes do not depend on the heads
  m.ffn_hidden = ffn_hidden;
  m.seq_len = seq_len;
  m.vocab = vocab;
  m.stages = stages;
  return m;
}

void sim_host_group::validate(const issue_sink& report) const {
  if (regions.empty())
    report("regions", "a non-empty list of region names, or [all]");
  check_int(report, "count", count, 1, 100000, "hosts per region");
  check_int(report, "stage", stage, 0, 1023, "a relay stage, or 0 to deal them round-robin");
  if (role == sim_role::data_holder && stage != 0)
    report("stage", "0 for data holders (they run stage 0), got " + std::to_string(stage));
  check_range(report, "tflops", tflops, 1e-6, 1e6, "effective TFLOP/s");
  check_range(report, "capacity", capacity, 1, 100000, "microbatches held at once");
  check_real(report, "uplink_mbit", uplink_mbit, 0, bound::closed, 1e7, bound::closed, "Mbit/s, 0 = no limit");
  check_real(report, "downlink_mbit", downlink_mbit, 0, bound::closed, 1e7, bound::closed, "Mbit/s, 0 = no limit");
  check_real(report, "memory_gb", memory_gb, 0, bound::closed, 1e6, bound::closed, "GB, 0 = unlimited");
  check_real(report, "swap_gbyte_s", swap_gbyte_s, 0, bound::open, 1e4, bound::closed, "GB/s");
}

void sim_atom_config::validate(const issue_sink& report) const {
  check_int(report, "sync_every", sync_every, 1, 1000000, "global batches between two averages");
  check_int(report, "local_microbatches", local_microbatches, 0, 1000000,
            "microbatches per local step (0: microbatches_per_holder)");
}

void sim_script_event::validate(const issue_sink& report) const {
  check_int(report, "iteration", iteration, 0, 100000000, "an iteration");
  check_real(report, "at", at, 0, bound::closed, 1e6, bound::closed, "a fraction of an iteration");
  switch (action) {
    case sim_action::crash:
    case sim_action::leave:
      if (host.empty())
        report("host", "the name of the relay that goes (a " + std::string{action == sim_action::crash ? "crash" : "leave"}
                         + " needs one)");
      break;
    case sim_action::join:
      if (region.empty())
        report("region", "the region of the joining relay (a join needs one)");
      check_real(report, "tflops", tflops, 1e-6, bound::closed, 1e6, bound::closed, "effective TFLOP/s");
      check_int(report, "capacity", capacity, 1, 100000, "microbatches held at once");
      check_int(report, "stage", stage, 0, 1023, "a relay stage, or 0 for the bottleneck stage");
      check_real(report, "uplink_mbit", uplink_mbit, 0, bound::closed, 1e7, bound::closed, "Mbit/s, 0 = no limit");
      check_real(report, "downlink_mbit", downlink_mbit, 0, bound::closed, 1e7, bound::closed, "Mbit/s, 0 = no limit");
      check_real(report, "memory_gb", memory_gb, 0, bound::closed, 1e6, bound::closed, "GB, 0 = unlimited");
      check_real(report, "swap_gbyte_s", swap_gbyte_s, 0, bound::open, 1e4, bound::closed, "GB/s");
      break;
    case sim_action::degrade:
      if (regions.size() != 2)
        report("regions", "two region names (a degrade needs them), got " + std::to_string(regions.size()));
      check_real(report, "factor", factor, 0, bound::open, 1, bound::closed, "a share of bandwidth");
      break;
  }
}

void sim_compression_config::validate(const issue_sink& report) const {
  if (!(min_density > 0 && min_density <= 1))
    report("min_density", "a fraction in (0, 1], got " + std::to_string(min_density));
  if (!(std::isfinite(compress_ns_per_value) && compress_ns_per_value >= 0))
    report("compress_ns_per_value", "nanoseconds >= 0, got " + std::to_string(compress_ns_per_value));
}

void sim_churn_config::validate(const issue_sink& report) const {
  check_real(report, "crash_rate", crash_rate, 0, bound::closed, 1, bound::closed, "a probability");
  check_real(report, "leave_rate", leave_rate, 0, bound::closed, 1, bound::closed, "a probability");
  if (crash_rate + leave_rate > 1)
    report("leave_rate", "crash_rate + leave_rate <= 1, got " + format_number(crash_rate + leave_rate));
  check_real(report, "join_rate", join_rate, 0, bound::closed, 1, bound::closed, "a probability");
  check_real(report, "degrade_rate", degrade_rate, 0, bound::closed, 1, bound::closed, "a probability");
  check_real(report, "degrade_factor", degrade_factor, 0, bound::open, 1, bound::closed, "a share of bandwidth");
  check_real(report, "detect_s", detect_s, 0, bound::closed, 3600, bound::closed, "seconds");
}

namespace {

// DT-FM's view of the scenario's initial hosts.
routing::dtfm_problem dtfm_view(const sim_scenario& s, const std::vector<std::size_t>& relays) {
  routing::dtfm_problem p;
  p.net = &s.net;
  p.relay_stages = s.stages - 1;
  p.activation_bytes = s.activation_bytes;
  p.gradient_bytes = s.stage_gradient_bytes;
  for (auto& h : s.hosts)
    if (h.stage == 0)
      p.holders.push_back(h.region);
  for (auto i : relays)
    p.relays.push_back(s.hosts[i].region);
  return p;
}

// Places the relays without a declared stage (`undeclared`, dealt round-robin so far).
std::string place_relays(sim_scenario& s, const std::vector<std::size_t>& undeclared,
                         sim_placement_policy policy, std::uint64_t seed) {
  int relay_stages = s.stages - 1;
  switch (policy) {
    case sim_placement_policy::deal:
      return {};
    case sim_placement_policy::random: {
      auto order = undeclared;
      std::mt19937_64 rng{seed ^ 0x706c6163656dULL};
      std::shuffle(order.begin(), order.end(), rng);
      for (std::size_t k = 0; k < order.size(); ++k)
        s.hosts[order[k]].stage = 1 + static_cast<int>(k % static_cast<std::size_t>(relay_stages));
      return {};
    }
    case sim_placement_policy::gwtf: {
      // As stage-less hosts place themselves at start, one after another in host order:
      // each sees the data holders, the declared relays and those placed before it.
      std::vector<routing::flow_node> known;
      std::set<std::size_t> pending(undeclared.begin(), undeclared.end());
      for (std::size_t i = 0; i < s.hosts.size(); ++i)
        if (pending.count(i) == 0)
          known.push_back({s.hosts[i].stage, s.hosts[i].capacity});
      for (auto i : undeclared) {
        int stage = routing::place_unstaged(known, s.stages, s.hosts[i].capacity);
        if (stage < 1)
          return "gwtf: no relay stage for " + s.hosts[i].name;
        s.hosts[i].stage = stage;
        known.push_back({stage, s.hosts[i].capacity});
      }
      return {};
    }
    case sim_placement_policy::dtfm: {
      if (undeclared.size() < static_cast<std::size_t>(relay_stages))
        return "dtfm needs at least one relay without a declared stage per relay stage ("
               + std::to_string(relay_stages) + "), got " + std::to_string(undeclared.size());
      routing::dtfm_options o;
      o.seed = seed;
      auto found = routing::dtfm_place(dtfm_view(s, undeclared), o);
      for (std::size_t k = 0; k < undeclared.size(); ++k)
        s.hosts[undeclared[k]].stage = found.best.stage[k];
      return {};
    }
  }
  return {};
}

// The initial relays' placement by DT-FM's model, when every relay stage has one.
std::optional<routing::dtfm_placement> dtfm_cost_of(const sim_scenario& s) {
  std::vector<std::size_t> relays;
  std::vector<int> stage;
  std::set<int> stages;
  for (std::size_t i = 0; i < s.hosts.size(); ++i)
    if (s.hosts[i].stage > 0) {
      relays.push_back(i);
      stage.push_back(s.hosts[i].stage);
      stages.insert(s.hosts[i].stage);
    }
  if (static_cast<int>(stages.size()) != s.stages - 1)
    return std::nullopt;
  return routing::dtfm_cost(dtfm_view(s, relays), stage);
}

} // namespace

derived_scenario derive_scenario(const sim_scenario_config& cfg, network_matrix net,
                                 const std::function<void(const std::string&, const std::string&)>& report) {
  bool failed = false;
  auto fail = [&](const std::string& key, const std::string& message) {
    failed = true;
    report(key, message);
  };
  sim_scenario s;
  s.net = std::move(net);
  auto& m = cfg.model;
  s.stages = m.stages;
  int relay_stages = m.stages - 1;
  double h = m.hidden;
  double tokens = static_cast<double>(m.microbatch_size) * m.seq_len;
  // Sizes as model/sizing.hpp counts them for the modules the runtime trains (every relay
  // stage holds as many blocks: validate() requires it).
  auto shape = m.shape();
  auto relay_span = model::heaviest_relay_stage(shape);
  auto relay_size = model::size_of(shape, relay_span);
  auto holder_size = model::size_of(shape, model::partition(shape).front());
  auto stage_params = static_cast<double>(relay_size.parameters);
  auto holder_params = static_cast<double>(holder_size.parameters); // embedding + final norm and head
  s.tokens_per_microbatch = tokens;
  s.activation_bytes = tokens * h * m.bytes_per_value;
  // What a relay stage keeps per microbatch from forward to backward: 34 bytes per token and
  // hidden unit per block in 16-bit values (Korthikanti et al., "Reducing Activation
  // Recomputation in Large Transformer Models", 2022, without the attention-score term that
  // fused attention kernels do not keep): 17 values, a low estimate.
  s.stash_bytes = 17.0 * relay_span.blocks() * s.activation_bytes;
  s.stage_weight_bytes = stage_params * m.download_bytes_per_param;
  s.microbatches_per_holder = cfg.microbatches_per_holder;
  s.iterations = cfg.iterations;
  s.seed = cfg.seed;
  s.gwtf = cfg.routing.gwtf;
  s.gwtf_view = cfg.routing.gwtf_view;
  s.swarm = cfg.routing.swarm;
  s.swarm_via_trainer = cfg.routing.swarm_via_trainer;
  s.crash_rate = cfg.churn.crash_rate;
  s.leave_rate = cfg.churn.leave_rate;
  s.join_rate = cfg.churn.join_rate;
  s.degrade_rate = cfg.churn.degrade_rate;
  s.degrade_factor = cfg.churn.degrade_factor;
  s.detect_s = cfg.churn.detect_s;
  if (cfg.compression.mode == sim_compression_mode::adaptive) {
    s.compression = routing::compression_policy{cfg.compression.min_density,
                                                cfg.compression.links == routing::compression_links::all,
                                                static_cast<std::size_t>(m.bytes_per_value)};
    s.compress_s_per_value = cfg.compression.compress_ns_per_value * 1e-9;
  }
  // A training step's FLOPs (forward + backward, model/sizing.hpp) at the host's speed.
  auto relay_s = [&](double tflops) { return relay_size.training_flops_per_token() * tokens / (tflops * 1e12); };
  auto holder_s = [&](double tflops) { return holder_size.training_flops_per_token() * tokens / (tflops * 1e12); };
  // Atom mode: the whole model's step on one host, its memory and swap bandwidth.
  auto model_s = [&](double tflops) { return holder_s(tflops) + relay_stages * relay_s(tflops); };
  auto atom_memory = [&](sim_host& host, double tflops, double memory_gb, double swap_gbyte_s) {
    host.model_compute_s = model_s(tflops);
    host.memory_bytes = memory_gb > 0 ? memory_gb * 1e9 : std::numeric_limits<double>::infinity();
    host.swap_bytes_s = swap_gbyte_s * 1e9;
  };
  {
    auto params = static_cast<double>(model::model_parameters(shape));
    auto largest = static_cast<double>(std::max({model::block_parameters(shape), model::entry_parameters(shape),
                                                 model::exit_parameters(shape)}));
    s.atom.state_bytes = 16 * params; // fp32 weights, gradients, Adam's two moments
    // The blocks' stash as a relay keeps it (above), plus the logits, their softmax and its
    // gradient in fp32 (as model/sizing.hpp counts a data holder's).
    double logits = 3 * tokens * m.vocab * 4;
    s.atom.activation_bytes = 17.0 * m.layers * s.activation_bytes + logits;
    s.atom.remat_activation_bytes = (m.layers + 17.0) * s.activation_bytes + logits;
    s.atom.block_state_bytes = 16 * largest;
    s.atom.average_bytes = model::share_wire_bytes(cfg.training.share_compression, params);
    s.atom.download_bytes = params * m.download_bytes_per_param;
    s.atom.sync_every = cfg.training.atom.sync_every;
    s.atom.local_microbatches = cfg.training.atom.local_microbatches > 0 ? cfg.training.atom.local_microbatches
                                                                       : cfg.microbatches_per_holder;
  }

  std::map<std::string, int> per_region; // host names: <region>-dh<k> / <region>-r<k>
  std::map<std::string, std::size_t> names;
  std::size_t relays = 0, holders = 0;
  std::uint64_t drawn = 0;
  std::vector<std::size_t> undeclared; // relays without a stage: placed by placement.policy
  for (std::size_t g = 0; g < cfg.hosts.size(); ++g) {
    auto& grp = cfg.hosts[g];
    std::string at = "hosts[" + std::to_string(g) + "]";
    if (grp.stage >= m.stages)
      fail(at + ".stage", "expected a relay stage below model.stages (" + std::to_string(m.stages)
                                   + "), got " + std::to_string(grp.stage));
    std::vector<std::size_t> regions;
    for (std::size_t k = 0; k < grp.regions.size(); ++k) {
      if (grp.regions[k] == "all") {
        for (std::size_t i = 0; i < s.net.regions.size(); ++i)
          regions.push_back(i);
        continue;
      }
      auto idx = s.net.region_index(grp.regions[k]);
      if (!idx) {
        std::string known;
        for (auto& reg : s.net.regions)
          known += (known.empty() ? "" : ", ") + reg;
        fail(at + ".regions[" + std::to_string(k) + "]", "expected a region of network '" + s.net.name
                                                                  + "' (" + known + ") or all, got '"
                                                                  + grp.regions[k] + "'");
        continue;
      }
      regions.push_back(*idx);
    }
    for (auto reg : regions)
      for (int c = 0; c < grp.count; ++c) {
        sim_host host;
        bool holder = grp.role == sim_role::data_holder;
        auto& region = s.net.regions[reg];
        host.name = region + (holder ? "-dh" : "-r") + std::to_string(per_region[region + (holder ? "h" : "r")]++);
        host.region = reg;
        double tflops = draw(grp.tflops, seeded_unit(cfg.seed, 1, drawn));
        host.capacity = draw(grp.capacity, seeded_unit(cfg.seed, 2, drawn));
        host.uplink_bytes_s = nic_bytes_s(grp.uplink_mbit);
        host.downlink_bytes_s = nic_bytes_s(grp.downlink_mbit);
        atom_memory(host, tflops, grp.memory_gb, grp.swap_gbyte_s);
        ++drawn;
        if (holder) {
          host.stage = 0;
          host.compute_s = holder_s(tflops);
          ++holders;
        } else {
          host.stage = grp.stage > 0 ? grp.stage : 1 + static_cast<int>(relays % static_cast<std::size_t>(relay_stages));
          host.compute_s = relay_s(tflops);
          if (grp.stage == 0)
            undeclared.push_back(s.hosts.size());
          ++relays;
        }
        names[host.name] = s.hosts.size();
        s.hosts.push_back(std::move(host));
      }
  }
  if (holders == 0)
    fail("hosts", "expected at least one group with role: data_holder");
  // A share's values as training.share_compression puts them on the wire.
  s.stage_gradient_bytes = model::share_wire_bytes(cfg.training.share_compression, stage_params);
  if (relay_stages >= 1 && holders > 0)
    if (auto why = place_relays(s, undeclared, cfg.placement.policy, cfg.seed); !why.empty())
      fail("placement.policy", why);
  std::vector<int> per_stage(static_cast<std::size_t>(m.stages), 0);
  for (auto& host : s.hosts)
    if (host.stage > 0 && host.stage < m.stages)
      ++per_stage[static_cast<std::size_t>(host.stage)];
  for (int st = 1; st < m.stages; ++st)
    if (per_stage[static_cast<std::size_t>(st)] == 0)
      fail("hosts", "expected at least one relay of stage " + std::to_string(st) + " (model.stages = "
                             + std::to_string(m.stages) + ")");
  s.holder_gradient_bytes = model::share_wire_bytes(cfg.training.share_compression, holder_params);
  s.averaging = cfg.training.averaging;
  s.protocol_latency = cfg.training.protocol_latency;

  for (std::size_t i = 0; i < cfg.churn.script.size(); ++i) {
    auto& ev = cfg.churn.script[i];
    std::string at = "churn.script[" + std::to_string(i) + "]";
    sim_event e;
    e.iteration = ev.iteration;
    e.at_fraction = ev.at;
    if (ev.iteration >= cfg.iterations)
      fail(at + ".iteration", "expected an iteration below iterations (" + std::to_string(cfg.iterations)
                                       + "), got " + std::to_string(ev.iteration));
    switch (ev.action) {
      case sim_action::crash:
      case sim_action::leave: {
        e.kind = ev.action == sim_action::crash ? sim_event_kind::crash : sim_event_kind::leave;
        auto it = names.find(ev.host);
        if (it == names.end() || s.hosts[it->second].stage == 0) {
          std::string example = "oregon-r0";
          for (auto& host : s.hosts)
            if (host.stage > 0) {
              example = host.name;
              break;
            }
          fail(at + ".host", "expected the name of a relay (<region>-r<k>, e.g. '" + example + "'), got '"
                                      + ev.host + "'");
          continue;
        }
        e.host = it->second;
        break;
      }
      case sim_action::join: {
        e.kind = sim_event_kind::join;
        auto reg = s.net.region_index(ev.region);
        if (!reg) {
          fail(at + ".region", "expected a region of network '" + s.net.name + "', got '" + ev.region + "'");
          continue;
        }
        if (ev.stage >= m.stages)
          fail(at + ".stage", "expected a relay stage below model.stages, got " + std::to_string(ev.stage));
        e.joiner.name = ev.region + "-j" + std::to_string(i);
        e.joiner.region = *reg;
        e.joiner.stage = ev.stage > 0 ? ev.stage : -1;
        e.joiner.capacity = ev.capacity;
        e.joiner.compute_s = relay_s(ev.tflops);
        e.joiner.uplink_bytes_s = nic_bytes_s(ev.uplink_mbit);
        e.joiner.downlink_bytes_s = nic_bytes_s(ev.downlink_mbit);
        atom_memory(e.joiner, ev.tflops, ev.memory_gb, ev.swap_gbyte_s);
        break;
      }
      case sim_action::degrade: {
        e.kind = sim_event_kind::degrade;
        auto a = s.net.region_index(ev.regions[0]), b = s.net.region_index(ev.regions[1]);
        if (!a || !b) {
          fail(at + ".regions", "expected two regions of network '" + s.net.name + "', got '"
                                         + ev.regions[0] + "', '" + ev.regions[1] + "'");
          continue;
        }
        e.region_a = *a;
        e.region_b = *b;
        e.factor = ev.factor;
        break;
      }
    }
    s.script.push_back(e);
  }
  derived_scenario out;
  if (!failed)
    out.dtfm = dtfm_cost_of(s);
  out.sim = std::move(s);
  return out;
}

} // namespace gwtf::sim
