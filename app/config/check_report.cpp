#include "app/config/check_report.hpp"

#include <algorithm>
#include <cstdio>
#include <sstream>

#include <unistd.h>

#include "model/partition.hpp"
#include "model/sizing.hpp"
#include "routing/cost_model.hpp"
#include "routing/optimum.hpp"
#include "app/config/derive.hpp"

namespace gwtf::app {

namespace {

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

std::string megabytes(double bytes) { return fixed(bytes / 1e6, 0); }

// Each host's estimated memory (model::estimate_memory), and their sum against the machine's.
void memory_report(std::ostringstream& out, const cluster_config& cfg, std::uint64_t machine_bytes) {
  auto spans = model::partition(cfg.model);
  int holders = static_cast<int>(cfg.training.data_holders.size());
  if (holders == 0) // the embedded cluster's roster is its data holders
    for (auto& h : cfg.hosts)
      holders += h.role == actors::host_role::data_holder ? 1 : 0;
  holders = std::max(1, holders);
  bool remat = routing::rematerialises(cfg.routing.gwtf.backward, false); // capacity counts microbatches
  auto sums = cfg.training.reproducible_sums;
  out << "# memory per host (estimate, fp32; MB): weights + Adam moments + gradients and "
      << (sums == model::sum_order::key_order ? "one sum per microbatch counted (reproducible_sums: key_order)"
          : sums == model::sum_order::exact   ? "int64 sums per data holder (reproducible_sums: exact)"
                                              : "sums per data holder")
      << " + shares averaged + activations at its capacity" << (remat ? " (rematerialised)" : " (stashed)") << "\n";
  double total = 0;
  for (auto& h : cfg.hosts) {
    if (h.stage < 0) {
      out << "#   " << h.name << ": placed at run time\n";
      continue;
    }
    int replicas = 0;
    for (auto& o : cfg.hosts)
      replicas += o.stage == h.stage ? 1 : 0;
    replicas = std::max(replicas, h.stage == 0 ? holders : 2); // node mode: assume a replicated stage
    auto& span = spans[static_cast<std::size_t>(h.stage)];
    auto blocks = span.end_layer - span.first_layer;
    auto block_state = static_cast<double>(model::block_parameters(cfg.model)) * 16; // weights, moments, a sum
    // A budget lowers the capacity (what is in flight) and, swapped, sets the resident pool.
    auto plan = model::plan_budget(cfg.model, span, cfg.training.microbatch_size, h.capacity,
                                 h.memory_budget_mb * 1024 * 1024, remat);
    std::string lowered = plan.capacity < h.capacity ? "; capacity " + std::to_string(plan.capacity) + " of "
                                                         + std::to_string(h.capacity) + " in its budget"
                                                     : "";
    // A swapped stage rematerialises block by block: its activations as a rematerialising relay's.
    auto m = model::estimate_memory(cfg.model, span, cfg.training.microbatch_size, plan.capacity, replicas, holders,
                                    remat || plan.swapped, sums, cfg.training.microbatches_per_holder);
    if (plan.swapped) { // docs/model.md, "Layer swapping": the state in a file, a pool of blocks resident
      auto pool = plan.pool;
      auto in_file = m.weights + m.optimizer + m.gradients;
      auto resident = pool * block_state;
      total += resident + m.shares + m.activations;
      out << "#   " << h.name << ": " << megabytes(resident + m.shares + m.activations) << " (swapped: " << pool << " of "
          << blocks << " blocks resident, " << megabytes(resident) << " + " << megabytes(m.shares) << " + "
          << megabytes(m.activations) << "; " << megabytes(in_file) << " in its swap file" << lowered << ")\n";
      continue;
    }
    total += m.total();
    out << "#   " << h.name << ": " << megabytes(m.total()) << " (" << megabytes(m.weights) << " + "
        << megabytes(m.optimizer) << " + " << megabytes(m.gradients) << " + " << megabytes(m.shares) << " + "
        << megabytes(m.activations) << lowered << ")\n";
  }
  if (machine_bytes == 0)
    return;
  auto hosts = cfg.hosts.size();
  out << "# this process's " << hosts << " host(s) need about " << megabytes(total) << " MB; this machine has "
      << megabytes(static_cast<double>(machine_bytes)) << " MB\n";
  if (total > static_cast<double>(machine_bytes))
    out << "# warning: more than this machine's memory: lower the capacities, set routing.gwtf.backward: "
           "rematerialize, or run the hosts on machines of their own (node mode)\n";
}

} // namespace

std::string derived_report(const cluster_config& cfg) {
  auto pages = ::sysconf(_SC_PHYS_PAGES);
  auto page = ::sysconf(_SC_PAGESIZE);
  return derived_report(cfg, pages > 0 && page > 0 ? static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page)
                                                   : 0);
}

std::string derived_report(const cluster_config& cfg, std::uint64_t machine_bytes) {
  std::ostringstream out;
  auto spans = model::partition(cfg.model);
  out << "# --- derived (not config keys) ---\n";
  out << "# pipeline: " << cfg.model.stages << " stages, " << cfg.model.layers << " blocks, "
      << "MLP width " << cfg.model.resolved_ffn_hidden() << ", " << model::model_parameters(cfg.model)
      << " parameters\n";
  for (auto& span : spans) {
    auto size = model::size_of(cfg.model, span);
    out << "#   " << model::describe(span) << " (" << size.parameters << " parameters, "
        << fixed(size.training_flops_per_token() / 1e6, 2) << " MFLOP per token forward + backward); hosts:";
    int capacity = 0;
    int count = 0;
    for (auto& h : cfg.hosts)
      if (h.stage == span.stage) {
        out << " " << h.name;
        capacity += budget_capacity(cfg, h); // what its memory budget leaves room for
        ++count;
      }
    if (count == 0)
      out << " none in this process";
    else
      out << " (capacity " << capacity << ")";
    out << "\n";
  }
  int unplaced = 0;
  for (auto& h : cfg.hosts)
    unplaced += h.stage < 0 ? 1 : 0;
  if (unplaced > 0 && cfg.placement.policy == placement_policy::dtfm) {
    // What the founding stage-less relays compute from a full view (placed_hosts).
    out << "#   " << unplaced << " relay(s) without a stage, placed by DT-FM (late joiners: the bottleneck stage):";
    auto placed = placed_hosts(cfg);
    for (std::size_t i = 0; i < cfg.hosts.size(); ++i)
      if (cfg.hosts[i].stage < 0)
        out << " " << placed[i].name << "=" << placed[i].stage;
    out << "\n";
  } else if (unplaced > 0) {
    out << "#   " << unplaced << " relay(s) without a stage join the bottleneck stage\n";
  }
  auto act = model::activation_bytes(cfg.model, cfg.training.microbatch_size);
  out << "# activation per microbatch: " << act << " bytes (fp32 " << cfg.training.microbatch_size
      << " x " << cfg.model.seq_len << " x " << cfg.model.hidden << ")\n";
  memory_report(out, cfg, machine_bytes);

  if (cfg.hosts.size() == 1) {
    char hash[17];
    std::snprintf(hash, sizeof hash, "%016llx", static_cast<unsigned long long>(cluster_hash(cfg)));
    out << "# node mode: this process is one host; flows are negotiated with the peers reached "
           "through node.bootstrap at run time\n"
        << "# cluster hash " << hash << " (model, training, data format, routing, placement policy, compression, data holders, "
           "heartbeat and timeouts): every "
           "host of the cluster must print the same\n";
    return out.str();
  }

  // The whole cluster runs here: the flow optimum over its hosts, all of them online.
  std::vector<routing::flow_node> nodes;
  std::vector<std::size_t> host_of;
  for (std::size_t i = 0; i < cfg.hosts.size(); ++i)
    if (cfg.hosts[i].stage >= 0) {
      nodes.push_back(routing::flow_node{cfg.hosts[i].stage, budget_capacity(cfg, cfg.hosts[i])});
      host_of.push_back(i);
    }
  auto network_cost = [&](std::size_t a, std::size_t b) -> double {
    if (!cfg.network)
      return 0.0;
    auto& net = *cfg.network;
    auto ra = *net.region_index(cfg.hosts[host_of[a]].region);
    auto rb = *net.region_index(cfg.hosts[host_of[b]].region);
    // Compute time is measured at run time; here only the network part of d_ij.
    return routing::edge_cost(0, 0, routing::to_estimate(net.link(ra, rb)),
                              routing::to_estimate(net.link(rb, ra)), static_cast<double>(act));
  };
  auto opt = routing::max_flow_min_cost(nodes, cfg.model.stages, network_cost);
  out << "# flows with every declared host online: at most " << opt.flows
      << " microbatches in flight (bottleneck: stage " << opt.bottleneck_stage << ", capacity "
      << opt.stage_capacity[static_cast<std::size_t>(opt.bottleneck_stage)] << ")\n";
  int per_iteration = 0;
  for (auto& h : cfg.hosts)
    if (h.role == actors::host_role::data_holder)
      per_iteration += cfg.training.microbatches_per_holder;
  out << "# global batch: " << per_iteration << " microbatches per iteration ("
      << per_iteration * cfg.training.microbatch_size << " sequences)\n";
  if (cfg.network && opt.flows > 0)
    out << "# network '" << cfg.network->name << "', time scale " << cfg.emulation->time_scale
        << ": optimal routing costs " << fixed(opt.total_cost_s / opt.flows * 1e3, 2)
        << " ms of network delay per flow on average (compute is measured at run time)\n";
  return out.str();
}

} // namespace gwtf::app
