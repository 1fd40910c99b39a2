#include "routing/routing_config.hpp"

#include <cmath>

namespace gwtf::routing {


void gwtf_config::validate(const issue_sink& report) const {
  check_int(report, "tick_ms", tick_ms, 1, 3'600'000, "a tick period in milliseconds");
  check_real(report, "initial_temperature", initial_temperature, 0.0, bound::closed, 1e6, bound::closed,
             "a temperature");
  check_real(report, "cooling", cooling, 0.0, bound::open, 1.0, bound::closed, "a cooling factor");
  check_real(report, "min_temperature", min_temperature, 0.0, bound::closed, 1e6, bound::closed, "a temperature");
  if (std::isfinite(min_temperature) && std::isfinite(initial_temperature)
      && min_temperature > initial_temperature)
    report("min_temperature", "at most initial_temperature (" + format_number(initial_temperature)
                                + "), got " + format_number(min_temperature));
  check_real(report, "swap_probability", swap_probability, 0.0, bound::closed, 1.0, bound::closed,
             "a probability");
  check_real(report, "min_gain", min_gain, 0.0, bound::closed, 1.0, bound::open, "a fraction of a cost");
  check_real(report, "reroute_gain", reroute_gain, 0.0, bound::closed, 1.0, bound::open,
             "a fraction of a cost (0: built flows are never re-routed for cost)");
  check_int(report, "half_built_ttl_ticks", half_built_ttl_ticks, 1, 1'000'000, "a number of ticks");
  check_int(report, "anti_entropy_ticks", anti_entropy_ticks, 1, 1'000'000, "a number of ticks");
  check_int(report, "refresh_ticks", refresh_ticks, 1, 1'000'000,
            "a number of ticks (1: adverts and listings every tick)");
  check_int(report, "request_timeout_ms", request_timeout_ms, 1, 3'600'000,
            "a timeout in milliseconds");
}

void swarm_config::validate(const issue_sink& report) const {
  check_int(report, "refresh_ms", refresh_ms, 1, 86'400'000, "a refresh period in milliseconds");
  check_real(report, "ema_alpha", ema_alpha, 0.0, bound::open, 1.0, bound::closed, "an EMA weight");
  check_real(report, "backward_factor", backward_factor, 0.0, bound::open, 100.0, bound::closed,
             "a backward/forward task-size ratio");
  check_real(report, "initial_seconds_per_task", initial_seconds_per_task, 0.0, bound::open, 3600.0, bound::closed,
             "seconds per task unit");
  check_int(report, "rebalance_ms", rebalance_ms, 0, 86'400'000, "a rebalancing period in milliseconds (0: off)");
  check_int(report, "forward_timeout_ms", forward_timeout_ms, 1, 3'600'000, "a call timeout in milliseconds");
  check_int(report, "backward_timeout_ms", backward_timeout_ms, 1, 3'600'000, "a call timeout in milliseconds");
}

void routing_config::validate(const issue_sink& report) const {
  gwtf.validate(nested_sink(report, "gwtf"));
  swarm.validate(nested_sink(report, "swarm"));
}

} // namespace gwtf::routing
