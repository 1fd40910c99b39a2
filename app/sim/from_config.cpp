#include "app/sim/from_config.hpp"

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>

#include "app/run/random_crashes.hpp"
#include "sim/scenario.hpp"

namespace gwtf::app {

namespace {

using actors::fault_action;
using actors::fault_phase;
using actors::host_role;

// Where in its iteration a crash of this phase lands in the simulation (a fraction of the
// iteration before it): at the start, early (the host's forward), mid-way (its backward),
// near the end (the stage's averaging).
double at_fraction(fault_phase p) {
  switch (p) {
    case fault_phase::any: return 0.0;
    case fault_phase::forward: return 0.25;
    case fault_phase::backward: return 0.6;
    case fault_phase::averaging: return 0.9;
  }
  return 0.0;
}

// The emulated network as the trainer runs it: delays x time_scale, bandwidths / it.
routing::network_matrix scaled(routing::network_matrix net, double time_scale) {
  auto scale = [time_scale](routing::link_params& l) {
    l.latency_ms *= time_scale;
    l.bandwidth_mbps /= time_scale;
  };
  scale(net.intra_region);
  for (auto& l : net.intra_by_region)
    scale(l);
  for (auto& row : net.latency_ms)
    for (auto& v : row)
      v *= time_scale;
  for (auto& row : net.bandwidth_mbps)
    for (auto& v : row)
      v /= time_scale;
  return net;
}

const char* action_name(fault_action a) {
  for (auto& [v, name] : enum_names(a))
    if (v == a)
      return name;
  return "?";
}

// A fault of the trainer as a simulator event, before host indices are known.
struct planned_event {
  int iteration = 0;
  double at = 0;
  sim::sim_event_kind kind = sim::sim_event_kind::crash;
  std::string host;
  std::string peer;   // degrade: the link's other end
  double factor = 1;  // degrade: the bandwidth it keeps
};

} // namespace

scenario_result scenario_from_config(const cluster_config& cfg, const std::string& file,
                                     const measured_compute& compute, std::optional<std::uint64_t> seed) {
  scenario_result out;
  auto report = [&](const std::string& key, const std::string& message) {
    out.errors.push_back(config_error{file, 0, 0, key, message});
  };
  if (!cfg.emulation || !cfg.network) {
    report("emulation.network", "expected a network matrix: the simulator models the network the cluster emulates");
    return out;
  }
  double time_scale = cfg.emulation->time_scale;
  if (!(time_scale > 0))
    report("emulation.time_scale", "expected a scale above 0 to simulate (0 turns the emulated delays off; the "
                                   "simulator has no network without delays), got "
                                     + std::to_string(time_scale));
  if (!(compute.holder_s > 0 && compute.relay_s > 0))
    report("", "expected measured compute times above 0 (holder " + std::to_string(compute.holder_s) + " s, relay "
                 + std::to_string(compute.relay_s) + " s)");

  // Hosts a scripted join brings online enter the simulation then.
  std::set<std::string> joiners;
  for (auto& f : cfg.faults.script)
    if (f.action == fault_action::join)
      joiners.insert(f.host);
  std::map<std::string, const actors::host_config*> by_name;
  for (auto& h : cfg.hosts)
    by_name[h.name] = &h;

  sim::sim_scenario_config sc;
  sc.name = std::filesystem::path{file}.stem().string();
  sc.network = cfg.emulation->network;
  sc.seed = seed.value_or(cfg.training.seed);
  sc.iterations = cfg.training.iterations;
  sc.microbatches_per_holder = cfg.training.microbatches_per_holder;
  auto& m = sc.model;
  m.arch = cfg.model.arch;
  m.layers = cfg.model.layers;
  m.hidden = cfg.model.hidden;
  m.ffn_hidden = cfg.model.ffn_hidden;
  m.seq_len = cfg.model.seq_len;
  m.microbatch_size = cfg.training.microbatch_size;
  m.vocab = cfg.model.vocab;
  m.stages = cfg.model.stages;
  m.bytes_per_value = cfg.compression.mode == compression_mode::off ? 4 : 2; // fp32, or 16 bits on the wire
  m.download_bytes_per_param = 12; // a joiner downloads fp32 weights and Adam's two moments
  m.validate([&](const std::string& key, const std::string& message) {
    report("model." + key, "expected " + message + " (to simulate)");
  });
  for (auto& h : cfg.hosts) {
    if (joiners.count(h.name) > 0)
      continue;
    sim::sim_host_group g;
    g.role = h.role == host_role::data_holder ? sim::sim_role::data_holder : sim::sim_role::relay;
    g.regions = {h.region};
    g.count = 1;
    g.stage = h.role == host_role::relay && h.stage > 0 ? h.stage : 0;
    g.tflops = {1.0}; // replaced by the measured compute below
    g.capacity = {h.capacity};
    g.uplink_mbit = h.uplink_mbit / time_scale;
    g.downlink_mbit = h.downlink_mbit / time_scale;
    sc.hosts.push_back(std::move(g));
  }
  sc.churn.detect_s = cfg.faults.connection_timeout_ms / 1000.0;
  sc.placement.policy = cfg.placement.policy == placement_policy::dtfm ? sim::sim_placement_policy::dtfm
                                                                       : sim::sim_placement_policy::gwtf;
  sc.routing.gwtf_view = 0; // a trainer's host knows every live peer
  sc.routing.gwtf = cfg.routing.gwtf;
  sc.routing.swarm = cfg.routing.swarm;
  sc.routing.swarm_via_trainer = true; // the runtime's SWARM calls every stage from the data holder
  if (cfg.compression.mode == compression_mode::adaptive) {
    sc.compression.mode = sim::sim_compression_mode::adaptive;
    sc.compression.min_density = cfg.compression.min_density;
    sc.compression.links = cfg.compression.links;
  }
  sc.training.averaging = cfg.training.averaging;
  sc.training.share_compression = cfg.training.share_compression;
  sc.training.protocol_latency = true; // the trainer's averaging is that protocol
  if (!out.errors.empty() || time_scale <= 0)
    return out;

  auto derived = sim::derive_scenario(sc, scaled(*cfg.network, time_scale), [&](const std::string& key, const std::string& message) {
    report(key, message + " (in the simulation of this config)");
  });
  if (!out.errors.empty())
    return out;
  auto& s = derived.sim;
  // The trainer's capacity counts microbatches, whatever a relay keeps of them
  // (routing::rematerialises(backward, false) in the stage actor): rematerialisation gains no
  // slots there, so `automatic` stashes. The simulator does the same without a stash size.
  s.stash_bytes = 0;
  double whole_model_s = compute.holder_s + (m.stages - 1) * compute.relay_s;
  // The config's names and measured compute for the hosts derive_scenario drew.
  std::map<std::string, std::size_t> index;
  std::size_t k = 0;
  for (auto& h : cfg.hosts) {
    if (joiners.count(h.name) > 0)
      continue;
    auto& sh = s.hosts[k];
    sh.name = h.name;
    sh.compute_s = (h.role == host_role::data_holder ? compute.holder_s : compute.relay_s) * h.compute_scale;
    sh.model_compute_s = whole_model_s * h.compute_scale; // router atom: the whole model on this host
    index[h.name] = k++;
  }

  // The trainer's faults, iteration by iteration, as its driver injects them: the script's
  // first, then the random crashes among the live hosts (by name, as the driver's set).
  std::vector<planned_event> planned;
  std::map<std::string, int> stage; // live hosts
  for (auto& [name, i] : index)
    stage[name] = s.hosts[i].stage;
  std::set<std::string> doomed;
  auto survivors = [&](int st, const std::string& except) {
    int n = 0;
    for (auto& [name, hs] : stage)
      n += name != except && doomed.count(name) == 0 && hs == st;
    return n;
  };
  for (int i = 0; i < cfg.training.iterations; ++i) {
    for (std::size_t f = 0; f < cfg.faults.script.size(); ++f) {
      auto& ev = cfg.faults.script[f];
      if (ev.at_iteration != i)
        continue;
      std::string at = "faults.script[" + std::to_string(f) + "]";
      if (by_name.count(ev.host) == 0 || (ev.action == fault_action::slow_link && by_name.count(ev.peer) == 0)) {
        report(at, "expected hosts declared in hosts, got '" + ev.host + "'"
                     + (ev.action == fault_action::slow_link ? " and peer '" + ev.peer + "'" : std::string{}));
        continue;
      }
      switch (ev.action) {
        case fault_action::crash:
        case fault_action::leave:
          if (stage.count(ev.host) == 0) {
            report(at + ".host", "expected a live host at iteration " + std::to_string(i) + " (the simulation "
                                   "crashes or removes a host once, after it joined), got '" + ev.host + "'");
            continue;
          }
          if (stage[ev.host] == 0) {
            report(at + ".host", "expected a relay: the simulator's data holders do not crash or leave, got '"
                                   + ev.host + "'");
            continue;
          }
          planned.push_back({i, ev.action == fault_action::crash ? at_fraction(ev.phase) : 0.5,
                             ev.action == fault_action::crash ? sim::sim_event_kind::crash : sim::sim_event_kind::leave,
                             ev.host, {}, 1.0});
          stage.erase(ev.host);
          break;
        case fault_action::join: {
          auto& h = *by_name.at(ev.host);
          if (h.role != host_role::relay) {
            report(at + ".host", "expected a relay: the simulator's joiners are relays, got data holder '" + ev.host + "'");
            continue;
          }
          planned.push_back({i, 0.0, sim::sim_event_kind::join, ev.host, {}, 1.0});
          stage[ev.host] = h.stage > 0 ? h.stage : -1;
          break;
        }
        case fault_action::slow_link: // the simulator degrades region pairs, both ways
          planned.push_back({i, 0.0, sim::sim_event_kind::degrade, ev.host, ev.peer, 1.0 / ev.slowdown});
          break;
        default:
          report(at + ".action", std::string{"crash, leave, join or slow_link: the simulator has no "}
                                   + action_name(ev.action) + " (leave it out to simulate this config)");
      }
    }
    if (cfg.faults.crash_rate <= 0)
      continue;
    std::vector<std::string> live;
    for (auto& [name, st] : stage)
      live.push_back(name);
    for (auto& name : live) {
      auto phase = random_crash_draw(sc.seed, static_cast<std::uint64_t>(i), name, cfg.faults.crash_rate);
      int st = stage[name];
      if (st == 0 || !phase || doomed.count(name) > 0 || survivors(st, name) == 0)
        continue;
      doomed.insert(name);
      planned.push_back({i, at_fraction(*phase), sim::sim_event_kind::crash, name, {}, 1.0});
      stage.erase(name);
    }
  }
  // The simulator orders its events by iteration, then time; a joiner's index follows the
  // scenario's hosts in that order.
  std::stable_sort(planned.begin(), planned.end(), [](const planned_event& a, const planned_event& b) {
    return a.iteration != b.iteration ? a.iteration < b.iteration : a.at < b.at;
  });
  std::size_t next_joiner = s.hosts.size();
  for (auto& p : planned) {
    sim::sim_event e;
    e.kind = p.kind;
    e.iteration = p.iteration;
    e.at_fraction = p.at;
    if (p.kind == sim::sim_event_kind::join) {
      auto& h = *by_name.at(p.host);
      e.joiner.name = h.name;
      e.joiner.region = *s.net.region_index(h.region);
      e.joiner.stage = h.stage > 0 ? h.stage : -1;
      e.joiner.capacity = h.capacity;
      e.joiner.compute_s = compute.relay_s * h.compute_scale;
      e.joiner.model_compute_s = whole_model_s * h.compute_scale;
      e.joiner.uplink_bytes_s = h.uplink_mbit > 0 ? h.uplink_mbit / time_scale * 1e6 / 8 : e.joiner.uplink_bytes_s;
      e.joiner.downlink_bytes_s = h.downlink_mbit > 0 ? h.downlink_mbit / time_scale * 1e6 / 8 : e.joiner.downlink_bytes_s;
      index[h.name] = next_joiner++;
    } else if (p.kind == sim::sim_event_kind::degrade) {
      e.region_a = *s.net.region_index(by_name.at(p.host)->region);
      e.region_b = *s.net.region_index(by_name.at(p.peer)->region);
      e.factor = p.factor;
    } else {
      e.host = index.at(p.host);
    }
    s.script.push_back(e);
  }
  if (!out.errors.empty())
    return out;
  out.scenario = loaded_scenario{std::move(sc), std::move(derived.sim), std::move(derived.dtfm)};
  return out;
}

} // namespace gwtf::app
