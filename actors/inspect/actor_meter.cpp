#include "actors/inspect/actor_meter.hpp"

#include <cstdio>

#include <caf/actor_system.hpp>
#include <caf/atom.hpp>
#include <caf/uniform_type_info_map.hpp>

#include "actors/inspect/inspect_view.hpp"
#include "actors/net/wire_frame.hpp"

namespace gwtf::actors {

bool actor_meter::start_trace() {
  std::lock_guard<std::mutex> lock{mtx_};
  if (tracing_.load())
    return false;
  entries_.clear();
  dropped_ = 0;
  started_ = std::chrono::steady_clock::now();
  tracing_.store(true);
  return true;
}

std::vector<trace_entry> actor_meter::stop_trace(std::uint64_t& dropped) {
  std::lock_guard<std::mutex> lock{mtx_};
  tracing_.store(false);
  dropped = dropped_;
  dropped_ = 0;
  return std::move(entries_);
}

void actor_meter::record(std::string from, std::string what) {
  auto now = std::chrono::steady_clock::now();
  std::lock_guard<std::mutex> lock{mtx_};
  if (!tracing_.load()) // the trace ended meanwhile
    return;
  if (entries_.size() >= trace_capacity) {
    ++dropped_;
    return;
  }
  auto at = std::chrono::duration_cast<std::chrono::microseconds>(now - started_).count();
  entries_.push_back({at, std::move(from), std::move(what)});
}

host_meters::host_meters(std::map<std::uint64_t, std::string> others) : others_(std::move(others)) {
  for (auto& name : host_actor_names())
    meters_[name] = std::make_shared<actor_meter>();
}

std::shared_ptr<actor_meter> host_meters::of(const std::string& actor) const {
  auto it = meters_.find(actor);
  return it == meters_.end() ? nullptr : it->second;
}

std::string host_meters::name_of(std::uint64_t actor_id) const {
  if (actor_id == 0)
    return {};
  for (auto& [name, m] : meters_)
    if (m->actor_id() == actor_id)
      return name;
  auto it = others_.find(actor_id);
  return it == others_.end() ? std::string{} : it->second;
}

namespace {

std::string brief(std::string s, std::size_t max = 48) {
  if (s.size() > max)
    s = s.substr(0, max) + "...";
  return s;
}

std::string bytes_text(std::size_t n) {
  char buf[32];
  if (n >= 1000000)
    std::snprintf(buf, sizeof buf, "%.1f MB", static_cast<double>(n) / 1e6);
  else if (n >= 1000)
    std::snprintf(buf, sizeof buf, "%.1f kB", static_cast<double>(n) / 1e3);
  else
    std::snprintf(buf, sizeof buf, "%zu B", n);
  return buf;
}

} // namespace

std::string describe_message(const caf::mailbox_element& x, caf::actor_system& sys) {
  auto& c = x.content();
  std::string out = x.mid.is_response() ? "response:" : "";
  for (std::size_t i = 0; i < c.size(); ++i) {
    std::string part;
    if (c.match_element<caf::atom_value>(i))
      part = caf::to_string(c.get_as<caf::atom_value>(i));
    else if (c.match_element<std::string>(i))
      part = "\"" + brief(c.get_as<std::string>(i)) + "\"";
    else if (c.match_element<wire_frame>(i)) {
      auto& f = c.get_as<wire_frame>(i);
      part = wire::peek_kind(f.bytes.data(), f.bytes.size()) + " (" + bytes_text(f.bytes.size()) + ")";
    } else if (c.match_element<bool>(i) || c.match_element<std::int32_t>(i) || c.match_element<std::int64_t>(i)
               || c.match_element<std::uint32_t>(i) || c.match_element<std::uint64_t>(i)
               || c.match_element<double>(i))
      part = c.stringify(i);
    else
      part = brief(sys.types().portable_name(c.type(i)), 32);
    out += (out.empty() || out.back() == ':' ? "" : " ") + part;
  }
  return out.empty() ? "(empty message)" : out;
}

std::string describe_sender(const caf::mailbox_element& x, const host_meters& host, const caf::node_id& here) {
  if (!x.sender)
    return "-";
  if (x.sender->node() != here)
    return "remote #" + std::to_string(x.sender->id());
  auto name = host.name_of(x.sender->id());
  return name.empty() ? "#" + std::to_string(x.sender->id()) : name;
}

} // namespace gwtf::actors
