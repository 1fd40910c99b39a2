// The summary lines of a run, its loss series and plots.
#pragma once

#include <ostream>

#include "app/config/cluster_config.hpp"
#include "app/run/embedded.hpp"

namespace gwtf::app {

/// The summary lines of a run (and training.loss_out with its plots).
void print_summary(const cluster_config& cfg, const embedded_result& result, std::ostream& out);

} // namespace gwtf::app
