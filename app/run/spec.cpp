#include "app/run/spec.hpp"

#include "app/config/derive.hpp"
#include "model/partition.hpp"
#include "model/sizing.hpp"

namespace gwtf::app {

namespace {

using namespace gwtf::actors;

std::vector<std::string> holder_names(const cluster_config& cfg) {
  std::vector<std::string> out;
  for (auto& h : cfg.hosts)
    if (h.role == host_role::data_holder)
      out.push_back(h.name);
  return out;
}

} // namespace

std::shared_ptr<actors::cluster_spec> make_spec(const cluster_config& cfg) {
  using namespace gwtf::actors;
  auto spec = std::make_shared<cluster_spec>();
  spec->model = cfg.model;
  spec->training = cfg.training;
  spec->data = cfg.data;
  spec->routing = cfg.routing;
  spec->faults = cfg.faults;
  spec->hosts = placed_hosts(cfg);
  spec->holders = cfg.training.data_holders.empty() ? holder_names(cfg) : cfg.training.data_holders;
  spec->time_scale = cfg.emulation ? cfg.emulation->time_scale : 0.0;
  spec->max_message_bytes = cfg.node.max_message_bytes;
  spec->chunk_bytes = cfg.node.chunk_bytes;
  spec->activation_bytes = static_cast<double>(model::activation_bytes(cfg.model, cfg.training.microbatch_size));
  spec->data_dir = cfg.node.data_dir;
  spec->checkpoint_hash = checkpoint_hash(cfg);
  auto mode = cfg.compression.mode;
  spec->activation_wire_type = mode == compression_mode::fp16 || mode == compression_mode::adaptive ? wire::dtype::float16
                               : mode == compression_mode::bf16                                   ? wire::dtype::bfloat16
                                                                                                  : wire::dtype::float32;
  if (mode == compression_mode::adaptive)
    spec->adaptive = routing::compression_policy{cfg.compression.min_density,
                                                 cfg.compression.links == compression_links::all, 2};
  spec->placement_relays = cfg.placement.relays;
  spec->placement_wait_ms = cfg.placement.wait_ms;
  if (cfg.placement.policy == placement_policy::dtfm && cfg.placement_network) {
    spec->dtfm = dtfm_request_for(cfg);
    spec->dtfm_network = std::make_shared<const routing::network_matrix>(*cfg.placement_network);
  }
  return spec;
}

std::string runtime_refusal(const cluster_config& cfg) {
  if (cfg.routing.router == routing::router_kind::swarm) {
    if (cfg.routing.swarm.backward != routing::swarm_backward::rematerialize)
      return "routing.swarm.backward: stash is modelled by the simulator only; the runtime's SWARM servers keep "
             "nothing between calls (rematerialize, as SWARM's code; docs/runtime.md)";
    if (cfg.compression.mode == compression_mode::adaptive)
      return "compression.mode: adaptive sparsifies along GWTF's flows; with routing.router swarm use off, fp16 "
             "or bf16 (docs/runtime.md)";
  }
  return {};
}

} // namespace gwtf::app
