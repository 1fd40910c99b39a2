#include "routing/routing_config.hpp"

#include <cmath>

namespace gwtf::routing {

namespace {

void check_int(const issue_sink& report, const std::string& key, long long v, long long lo,
               long long hi, const char* what) {
  if (v < lo || v > hi)
    report(key, std::string{what} + " in [" + std::to_string(lo) + ", " + std::to_string(hi)
                  + "], got " + std::to_string(v));
}

void check_real(const issue_sink& report, const std::string& key, double v, double lo, double hi,
                bool lo_open, bool hi_open, const char* what) {
  bool ok = std::isfinite(v) && (lo_open ? v > lo : v >= lo) && (hi_open ? v < hi : v <= hi);
  if (!ok)
    report(key, std::string{what} + " in " + (lo_open ? "(" : "[") + std::to_string(lo) + ", "
                  + std::to_string(hi) + (hi_open ? ")" : "]") + ", got " + std::to_string(v));
}

// Prefixes the keys a nested struct reports with its own key.
issue_sink nested(const issue_sink& report, std::string prefix) {
  return [&report, prefix = std::move(prefix)](const std::string& key, const std::string& e) {
    report(prefix + "." + key, e);
  };
}

} // namespace

void gwtf_config::validate(const issue_sink& report) const {
  check_int(report, "tick_ms", tick_ms, 1, 3'600'000, "a tick period in milliseconds");
  check_real(report, "initial_temperature", initial_temperature, 0.0, 1e6, false, false,
             "a temperature");
  check_real(report, "cooling", cooling, 0.0, 1.0, true, false, "a cooling factor");
  check_real(report, "min_temperature", min_temperature, 0.0, 1e6, false, false, "a temperature");
  if (std::isfinite(min_temperature) && std::isfinite(initial_temperature)
      && min_temperature > initial_temperature)
    report("min_temperature", "at most initial_temperature (" + std::to_string(initial_temperature)
                                + "), got " + std::to_string(min_temperature));
  check_real(report, "swap_probability", swap_probability, 0.0, 1.0, false, false,
             "a probability");
  check_int(report, "half_built_ttl_ticks", half_built_ttl_ticks, 1, 1'000'000, "a number of ticks");
  check_int(report, "anti_entropy_ticks", anti_entropy_ticks, 1, 1'000'000, "a number of ticks");
  check_int(report, "request_timeout_ms", request_timeout_ms, 1, 3'600'000,
            "a timeout in milliseconds");
}

void swarm_config::validate(const issue_sink& report) const {
  check_int(report, "refresh_ms", refresh_ms, 1, 86'400'000, "a refresh period in milliseconds");
  check_real(report, "ema_alpha", ema_alpha, 0.0, 1.0, true, false, "an EMA weight");
  check_real(report, "backward_factor", backward_factor, 0.0, 100.0, true, false,
             "a backward/forward task-size ratio");
}

void routing_config::validate(const issue_sink& report) const {
  gwtf.validate(nested(report, "gwtf"));
  swarm.validate(nested(report, "swarm"));
}

} // namespace gwtf::routing
