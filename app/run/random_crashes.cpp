#include "app/run/random_crashes.hpp"

#include <functional>

#include "model/data.hpp"

namespace gwtf::app {

std::optional<actors::fault_phase> random_crash_draw(std::uint64_t seed, std::uint64_t iteration,
                                                     const std::string& name, double rate) {
  auto r = model::mix64(seed ^ model::mix64(iteration * 1000003 + std::hash<std::string>{}(name)));
  double u = static_cast<double>(r >> 11) / 9007199254740992.0;
  if (u >= rate)
    return std::nullopt;
  return (r & 1) ? actors::fault_phase::forward : actors::fault_phase::backward;
}

} // namespace gwtf::app
