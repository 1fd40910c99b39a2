#include "app/config/derive.hpp"

#include <algorithm>

#include "model/hash.hpp"
#include "model/partition.hpp"
#include "model/sizing.hpp"
#include "routing/placement.hpp"
#include "routing/routing_config.hpp"

namespace gwtf::app {

bool joins_by_script(const cluster_config& cfg, const std::string& host) {
  return std::any_of(cfg.faults.script.begin(), cfg.faults.script.end(), [&](const actors::fault_event& f) {
    return f.action == actors::fault_action::join && f.host == host && f.at_iteration > 0;
  });
}

routing::dtfm_request dtfm_request_for(const cluster_config& cfg) {
  routing::dtfm_request r;
  r.relay_stages = cfg.model.stages - 1;
  r.activation_bytes = static_cast<double>(model::activation_bytes(cfg.model, cfg.training.microbatch_size));
  r.gradient_bytes = model::relay_gradient_bytes(cfg.model, 4); // the trainer averages fp32 gradients
  r.seed = static_cast<std::uint64_t>(cfg.training.seed);
  return r;
}

std::uint64_t cluster_hash(const cluster_config& cfg) {
  // What every host must share: model, training (but where it writes its loss), the data
  // format, the roster and failure detection (a host with a shorter timeout than its peers
  // declares them dead while they are merely slower to beat). Not the data path (each
  // holder's own file), not the per-process sections (node, hosts, the rest of faults,
  // emulation).
  cluster_config shared;
  shared.model = cfg.model;
  shared.training = cfg.training;
  shared.training.loss_out.clear();
  if (shared.training.data_holders.empty())
    for (auto& h : cfg.hosts)
      if (h.role == actors::host_role::data_holder)
        shared.training.data_holders.push_back(h.name);
  shared.data.format = cfg.data.format;
  shared.routing = cfg.routing;
  shared.placement.policy = cfg.placement.policy; // every host must place alike; not its file
  shared.compression = cfg.compression;           // the loss depends on it
  shared.faults.heartbeat_interval_ms = cfg.faults.heartbeat_interval_ms;
  shared.faults.connection_timeout_ms = cfg.faults.connection_timeout_ms;
  shared.faults.hop_timeout_ms = cfg.faults.hop_timeout_ms;
  auto text = to_yaml(shared);
  std::uint64_t h = 1469598103934665603ull; // FNV-1a
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h == 0 ? 1 : h;
}

void make_atom(cluster_config& cfg) {
  cfg.training.mode = model::training_mode::atom;
  auto& roster = cfg.training.data_holders;
  for (auto& h : cfg.hosts) {
    h.role = actors::host_role::data_holder;
    h.stage = 0;
    // A roster listed for the pipeline's data holders grows by the former relays (after
    // them: the holders keep their data); node mode's one host cannot know the others: its
    // roster must list every peer.
    if (cfg.hosts.size() > 1 && !roster.empty() && std::find(roster.begin(), roster.end(), h.name) == roster.end())
      roster.push_back(h.name);
  }
}

std::vector<std::pair<std::string, std::string>> atom_refusals(const cluster_config& cfg) {
  std::vector<std::pair<std::string, std::string>> out; // docs/atom.md, "What atom mode leaves out"
  if (cfg.training.checkpoint_every > 0)
    out.emplace_back("training.checkpoint_every", "0 with training.mode atom (its peers write no checkpoints)");
  for (std::size_t i = 0; i < cfg.faults.script.size(); ++i) {
    auto a = cfg.faults.script[i].action;
    if (a == actors::fault_action::double_count || a == actors::fault_action::actor_failure)
      out.emplace_back("faults.script[" + std::to_string(i) + "].action",
                       "crash, join, leave, slow_link or hang with training.mode atom");
  }
  return out;
}

int budget_capacity(const cluster_config& cfg, const actors::host_config& h) {
  if (h.role != actors::host_role::relay || h.memory_budget_mb <= 0)
    return h.capacity;
  auto span = h.stage >= 1 && h.stage < cfg.model.stages ? model::partition(cfg.model).at(static_cast<std::size_t>(h.stage))
                                                        : model::heaviest_relay_stage(cfg.model);
  return model::plan_budget(cfg.model, span, cfg.training.microbatch_size, h.capacity, h.memory_budget_mb * 1024 * 1024,
                          routing::rematerialises(cfg.routing.gwtf.backward, false))
    .capacity;
}

std::vector<actors::host_config> placed_hosts(const cluster_config& cfg) {
  auto hosts = cfg.hosts;
  for (auto& h : hosts) // what a budget leaves room for is what the placement sees
    h.capacity = budget_capacity(cfg, h);
  if (cfg.placement.policy == placement_policy::dtfm && cfg.placement_network) {
    // The founding stage-less relays together, as each of them computes it from the same view.
    auto req = dtfm_request_for(cfg);
    std::vector<std::size_t> founding;
    std::vector<std::pair<std::string, std::string>> relays;
    for (std::size_t i = 0; i < hosts.size(); ++i) {
      if (hosts[i].role == actors::host_role::data_holder) {
        req.holder_regions.push_back(hosts[i].region);
      } else if (hosts[i].stage < 1 && !joins_by_script(cfg, hosts[i].name)) {
        founding.push_back(i);
        relays.emplace_back(hosts[i].name, hosts[i].region);
      }
    }
    auto stages = routing::dtfm_founding_stages(*cfg.placement_network, std::move(req), relays);
    for (std::size_t k = 0; k < stages.size(); ++k)
      hosts[founding[k]].stage = stages[k];
  }
  for (auto& h : hosts) {
    if (h.role == actors::host_role::relay && h.stage < 1) {
      std::vector<routing::flow_node> known;
      for (auto& o : hosts)
        if (o.stage >= 0 && (o.role == actors::host_role::data_holder || o.stage >= 1))
          known.push_back({o.role == actors::host_role::data_holder ? 0 : o.stage, o.capacity});
      h.stage = routing::place_unstaged(known, cfg.model.stages, h.capacity);
    }
  }
  for (std::size_t i = 0; i < hosts.size(); ++i) // placed: its own stage's blocks
    if (cfg.hosts[i].stage < 1 && hosts[i].stage >= 1) {
      auto h = cfg.hosts[i];
      h.stage = hosts[i].stage;
      hosts[i].capacity = budget_capacity(cfg, h);
    }
  return hosts;
}

std::uint64_t checkpoint_hash(const cluster_config& cfg) {
  // What a checkpoint's state depends on, so that resuming reproduces the uninterrupted
  // run: the model, the data format, the roster and every training setting that shapes an
  // update, but not how long the run is nor where it writes (a resumed run may go longer).
  cluster_config shared;
  shared.model = cfg.model;
  shared.training = cfg.training;
  shared.training.iterations = 1;
  shared.training.loss_out.clear();
  shared.training.checkpoint_every = 0;
  shared.training.checkpoint_keep = 1;
  shared.training.checkpoint_replicas = 0;
  shared.training.checkpoint_push_mb_s = 0;
  if (shared.training.data_holders.empty())
    for (auto& h : cfg.hosts)
      if (h.role == actors::host_role::data_holder)
        shared.training.data_holders.push_back(h.name);
  shared.data.format = cfg.data.format;
  auto text = to_yaml(shared);
  return model::fnv1a(reinterpret_cast<const std::uint8_t*>(text.data()), text.size()) | 1;
}

} // namespace gwtf::app
