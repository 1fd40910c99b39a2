#include "actors/net/link_emulator.hpp"

#include <algorithm>

namespace gwtf::actors {

link_emulator::link_emulator(routing::network_matrix matrix) : matrix_(std::move(matrix)) {}

bool link_emulator::place(const std::string& host, const std::string& region) {
  auto idx = matrix_.region_index(region);
  if (!idx)
    return false;
  region_of_[host] = *idx;
  return true;
}

void link_emulator::slow_down(const std::string& a, const std::string& b, double factor) {
  factor = std::max(1.0, factor);
  slowdown_[{a, b}] = factor;
  slowdown_[{b, a}] = factor;
}

std::optional<routing::link_params> link_emulator::link(const std::string& from,
                                                        const std::string& to) const {
  auto f = region_of_.find(from);
  auto t = region_of_.find(to);
  if (f == region_of_.end() || t == region_of_.end())
    return std::nullopt;
  auto p = matrix_.link(f->second, t->second);
  if (auto s = slowdown_.find({from, to}); s != slowdown_.end()) {
    p.latency_ms *= s->second;
    p.bandwidth_mbps /= s->second;
  }
  return p;
}

std::optional<double> link_emulator::deliver_at(const std::string& from, const std::string& to,
                                                std::size_t bytes, double now) {
  auto p = link(from, to);
  if (!p)
    return std::nullopt;
  double transfer = p->bandwidth_mbps > 0 ? static_cast<double>(bytes) * 8.0 / (p->bandwidth_mbps * 1e6)
                                          : 0.0;
  auto& busy = busy_until_[{from, to}];
  double start = std::max(now, busy);
  busy = start + transfer;
  return busy + p->latency_ms / 1000.0;
}

} // namespace gwtf::actors
