// Plots of a training run (the embedded cluster and `caf-gwtf launch`): the loss curve and
// the throughput per iteration as SVG, with crashes marked. Pure: rows in, SVG text out.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "app/run/embedded.hpp"

namespace gwtf::app {

/// Loss per iteration; a red mark where the crash count rose.
std::string loss_svg(const std::vector<iteration_row>& rows, const std::string& title);

/// Tokens per second per iteration; the same crash marks.
std::string throughput_svg(const std::vector<iteration_row>& rows, const std::string& title);

/// The flow graph at the end of a run as Graphviz DOT: one box per host, grouped by stage;
/// one edge per (host, next hop, data holder) with the number of flows and the ring cost,
/// coloured by data holder. `flows`: host -> its answer to the shell's `flows` (JSON); a
/// host whose answer does not parse is drawn without edges and named in a comment.
std::string flows_dot(const std::map<std::string, std::string>& flows, const std::string& title);

/// Writes `dot` to PATH.dot and, when Graphviz's `dot` is on the PATH, renders PATH.svg.
/// The files written, or why not, as lines for the run's output.
std::vector<std::string> write_flow_graph(const std::string& dot, const std::string& path);

} // namespace gwtf::app
