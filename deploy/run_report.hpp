// Plots of a training run (the embedded cluster and `caf-gwtf launch`): the loss curve and
// the throughput per iteration as SVG, with crashes marked. Pure: rows in, SVG text out.
#pragma once

#include <string>
#include <vector>

#include "deploy/embedded.hpp"

namespace gwtf::deploy {

/// Loss per iteration; a red mark where the crash count rose.
std::string loss_svg(const std::vector<iteration_row>& rows, const std::string& title);

/// Tokens per second per iteration; the same crash marks.
std::string throughput_svg(const std::vector<iteration_row>& rows, const std::string& title);

} // namespace gwtf::deploy
