#include "actors/net/port_guard.hpp"

#include <algorithm>

namespace gwtf::actors {

namespace {
std::string ms_text(std::chrono::milliseconds d) { return std::to_string(d.count()) + " ms"; }
} // namespace

std::string describe(port_guard::lapse l, const port_limits& limits) {
  return l == port_guard::lapse::handshake ? "no handshake within " + ms_text(limits.handshake_timeout)
                                           : "no byte in or out for " + ms_text(limits.idle_timeout);
}

std::string source_address(const std::string& a) {
  if (!a.empty() && a.front() == '[') {
    auto close = a.find(']');
    return close == std::string::npos ? a : a.substr(1, close - 1);
  }
  auto colon = a.rfind(':');
  if (colon == std::string::npos || a.find(':') != colon)
    return a; // no port, or a bare IPv6 address
  return a.substr(0, colon);
}

std::optional<std::uint64_t> port_guard::idlest(const std::string* address, time_point now) const {
  std::optional<std::uint64_t> best;
  time_point best_at{};
  for (auto& [id, e] : conns_) {
    if (!e.accepted || (address != nullptr && e.address != *address))
      continue;
    if (now - e.last_active < limits_.evictable_after)
      continue;
    if (!best || e.last_active < best_at || (e.last_active == best_at && id < *best)) {
      best = id;
      best_at = e.last_active;
    }
  }
  return best;
}

void port_guard::erase(std::unordered_map<std::uint64_t, entry>::iterator it) {
  if (it->second.accepted) {
    --accepted_;
    auto a = per_address_.find(it->second.address);
    if (a != per_address_.end() && --a->second == 0)
      per_address_.erase(a);
  }
  conns_.erase(it);
}

port_guard::admission port_guard::arrive(std::uint64_t id, const std::string& address, time_point now) {
  admission out;
  auto make_room = [&](const std::string* of, const std::string& cap) {
    auto victim = idlest(of, now);
    if (!victim) {
      out.why = cap + ", and none of them idle for " + ms_text(limits_.evictable_after);
      return false;
    }
    erase(conns_.find(*victim));
    out.evicted.push_back(*victim);
    return true;
  };
  if (open_from(address) >= limits_.max_per_address
      && !make_room(&address, "the address is at its limit of connections (" + std::to_string(limits_.max_per_address)
                                + " from " + address + ")"))
    return out;
  if (accepted_ >= limits_.max_connections
      && !make_room(nullptr, "the port is at its limit of connections (" + std::to_string(limits_.max_connections) + ")"))
    return out;
  auto& e = conns_[id];
  e = entry{address, true, false, now, now};
  ++accepted_;
  ++per_address_[address];
  out.admitted = true;
  return out;
}

void port_guard::dialled(std::uint64_t id, time_point now) { conns_[id] = entry{{}, false, false, now, now}; }

void port_guard::handshaken(std::uint64_t id) {
  if (auto it = conns_.find(id); it != conns_.end())
    it->second.handshaken = true;
}

void port_guard::active(std::uint64_t id, time_point now) {
  if (auto it = conns_.find(id); it != conns_.end())
    it->second.last_active = now;
}

void port_guard::left(std::uint64_t id) {
  if (auto it = conns_.find(id); it != conns_.end())
    erase(it);
}

std::size_t port_guard::open_from(const std::string& address) const {
  auto it = per_address_.find(address);
  return it == per_address_.end() ? 0 : it->second;
}

std::vector<std::pair<std::uint64_t, port_guard::lapse>> port_guard::expired(time_point now) {
  std::vector<std::pair<std::uint64_t, lapse>> out;
  for (auto& [id, e] : conns_) {
    if (!e.handshaken && now - e.arrived >= limits_.handshake_timeout)
      out.emplace_back(id, lapse::handshake);
    else if (e.accepted && limits_.idle_timeout.count() > 0 && now - e.last_active >= limits_.idle_timeout)
      out.emplace_back(id, lapse::idle);
  }
  std::sort(out.begin(), out.end());
  for (auto& [id, why] : out)
    erase(conns_.find(id));
  return out;
}

std::optional<port_guard::time_point> port_guard::next_deadline() const {
  std::optional<time_point> soonest;
  auto consider = [&](time_point t) {
    if (!soonest || t < *soonest)
      soonest = t;
  };
  for (auto& [id, e] : conns_) {
    if (!e.handshaken)
      consider(e.arrived + limits_.handshake_timeout);
    if (e.accepted && limits_.idle_timeout.count() > 0)
      consider(e.last_active + limits_.idle_timeout);
  }
  return soonest;
}

std::optional<std::string> refusal_log::refuse(const std::string& address, const std::string& why, std::string line,
                                               time_point now) {
  auto from = source_address(address);
  auto kind = [](const std::string& text) { return text.substr(0, text.find_first_of("0123456789(")); };
  auto key = from + "\n" + kind(line) + "\n" + kind(why);
  auto it = sources_.find(key);
  if (it != sources_.end() && now - it->second.said < window_) {
    ++it->second.held;
    return std::nullopt;
  }
  if (it == sources_.end()) {
    if (sources_.size() >= max_sources_) { // forget the stalest source
      auto stalest = std::min_element(sources_.begin(), sources_.end(),
                                      [](auto& a, auto& b) { return a.second.said < b.second.said; });
      sources_.erase(stalest);
    }
    it = sources_.emplace(key, source{}).first;
  }
  auto held = it->second.held;
  it->second = source{now, 0};
  if (held > 0)
    line += " (" + std::to_string(held) + " more like it from " + from + " since the last line, not logged)";
  return line;
}

} // namespace gwtf::actors
