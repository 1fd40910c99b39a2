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

void link_emulator::limit(const std::string& host, double uplink_mbit, double downlink_mbit) {
  auto& c = cards_[host];
  c.uplink_mbps = std::max(0.0, uplink_mbit);
  c.downlink_mbps = std::max(0.0, downlink_mbit);
}

std::optional<routing::link_params> link_emulator::path(const std::string& from, const std::string& to) const {
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

std::optional<routing::link_params> link_emulator::link(const std::string& from, const std::string& to) const {
  auto p = path(from, to);
  if (!p)
    return std::nullopt;
  auto cap = [&](double mbps) {
    if (mbps > 0)
      p->bandwidth_mbps = p->bandwidth_mbps > 0 ? std::min(p->bandwidth_mbps, mbps) : mbps;
  };
  if (auto c = cards_.find(from); c != cards_.end())
    cap(c->second.uplink_mbps);
  if (auto c = cards_.find(to); c != cards_.end())
    cap(c->second.downlink_mbps);
  return p;
}

double link_emulator::queue::carry(double bits, double mbps, double now, peer_framing::lane lane) {
  auto bps = mbps * 1e6;
  auto t = bits / bps;
  if (lane == peer_framing::bulk) {
    bulk_until = std::max({now, bulk_until, control_until}) + t;
    return bulk_until;
  }
  // The bulk fragment on the wire finishes first (node mode's sender interleaves the lanes at
  // fragment boundaries, control first); the bulk still queued waits for these bytes.
  auto fragment = std::min(static_cast<double>(peer_framing::fragment_bytes) * 8.0 / bps, std::max(0.0, bulk_until - now));
  control_until = std::max(now + fragment, control_until) + t;
  bulk_until = bulk_until > now ? bulk_until + t : control_until;
  return control_until;
}

std::optional<double> link_emulator::deliver_at(const std::string& from, const std::string& to, std::size_t bytes,
                                                double now, peer_framing::lane lane) {
  auto p = path(from, to);
  if (!p)
    return std::nullopt;
  auto bits = static_cast<double>(bytes) * 8.0;
  // Each of the link and the two cards is a queue of its own (0 Mbit/s: unlimited).
  auto carry = [&](queue& q, double mbps) { return mbps > 0 ? q.carry(bits, mbps, now, lane) : now; };
  double end = carry(links_[{from, to}], p->bandwidth_mbps);
  if (auto c = cards_.find(from); c != cards_.end())
    end = std::max(end, carry(c->second.up, c->second.uplink_mbps));
  if (auto c = cards_.find(to); c != cards_.end())
    end = std::max(end, carry(c->second.down, c->second.downlink_mbps));
  return end + p->latency_ms / 1000.0;
}

double link_emulator::receive_at(const std::string& host, std::size_t bytes, double now, peer_framing::lane lane) {
  auto c = cards_.find(host);
  if (c == cards_.end() || !(c->second.downlink_mbps > 0))
    return now;
  return c->second.down.carry(static_cast<double>(bytes) * 8.0, c->second.downlink_mbps, now, lane);
}

} // namespace gwtf::actors
