// What a run derives from its config, once: the hashes hosts and checkpoints must agree on,
// where the stage-less relays go, DT-FM's request. No CAF, no LibTorch: --check prints them
// (check_report.cpp), and the run's spec is built from them (app/run/spec.cpp).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "app/config/cluster_config.hpp"
#include "routing/dtfm.hpp"

namespace gwtf::app {

/// Hash of what every host of one cluster must agree on (model, training, data format,
/// routing, the data-holder roster). Hosts refuse peers with another (docs/runtime.md).
std::uint64_t cluster_hash(const cluster_config& cfg);
/// What a checkpoint must have been written under to be resumed from (docs/checkpoints.md):
/// model, data format, roster and the training settings that shape an update; not the
/// number of iterations, loss_out or the checkpoint settings.
std::uint64_t checkpoint_hash(const cluster_config& cfg);

/// The microbatches host `h` can hold at once under its `memory_budget_mb`
/// (model::plan_budget for its stage; a relay without one for the heaviest relay stage):
/// `h.capacity` for a data holder or a host without a budget.
int budget_capacity(const cluster_config& cfg, const actors::host_config& h);

/// `cfg.hosts` with each capacity as budget_capacity() says, and relays declared without a stage placed as node-mode hosts place
/// themselves from their membership view: with placement.policy gwtf one by one, in
/// declaration order (routing::place_unstaged); with dtfm the founding ones (not joining by
/// the fault script) together by DT-FM (routing::dtfm_founding_stages), the late joiners then by the gwtf rule.
std::vector<actors::host_config> placed_hosts(const cluster_config& cfg);

/// DT-FM's request for this config without its hosts: relay stages, an activation's and a
/// relay stage's gradient bytes (fp32, 12 hidden^2 parameters per block), training.seed.
routing::dtfm_request dtfm_request_for(const cluster_config& cfg);

/// training.mode atom (docs/atom.md): every host becomes a whole-model peer training on data
/// of its own, a data holder of the one stage it runs, whatever hosts[] declared.
void make_atom(cluster_config& cfg);
/// What atom mode cannot run in `cfg`, as (key, expectation) pairs; empty when nothing.
std::vector<std::pair<std::string, std::string>> atom_refusals(const cluster_config& cfg);

/// A host that comes online only through a join of the fault script, after iteration 0.
bool joins_by_script(const cluster_config& cfg, const std::string& host);

} // namespace gwtf::app
