// What the inspection shell's `actors`, `top` and `trace ACTOR` see of a host's actors
// (docs/shell.md): how many messages each actor handled, and, while a trace runs, what
// they were. CAF 0.17 has no per-message hook unless it is built with its actor profiler
// (Debian's is not), so a host's actors derive from `metered<Base>`, which counts in
// scheduled_actor::consume (every message an actor handles passes there) before handling.
//
// The meter outlives the actor: a host's actors restart together and their counts go on
// (the restarts are reported beside). Counting is one relaxed atomic increment; a trace
// records at most `trace_capacity` messages, under a mutex, only while it runs.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <caf/mailbox_element.hpp>
#include <caf/scheduled_actor.hpp>
#include <caf/stateful_actor.hpp>

namespace gwtf::actors {

/// One message a traced actor handled.
struct trace_entry {
  std::int64_t at_us = 0; ///< since the trace started
  std::string from;       ///< the sender: one of the host's actors by name, or what CAF knows of it
  std::string what;       ///< the message: its atom, then its other elements, briefly
};

/// The counters of one actor of a host.
class actor_meter {
public:
  static constexpr std::size_t trace_capacity = 2000;

  std::uint64_t handled() const { return handled_.load(std::memory_order_relaxed); }
  bool tracing() const { return tracing_.load(std::memory_order_relaxed); }
  /// The actor id of the current incarnation (0 before it starts).
  std::uint64_t actor_id() const { return id_.load(std::memory_order_relaxed); }

  /// Starts a trace; false when one is already running.
  bool start_trace();
  /// Ends the trace: what it recorded; `dropped`: messages beyond trace_capacity.
  std::vector<trace_entry> stop_trace(std::uint64_t& dropped);

  // --- called by the metered actor itself ---
  void bind(std::uint64_t actor_id) { id_.store(actor_id, std::memory_order_relaxed); }
  void count() { handled_.fetch_add(1, std::memory_order_relaxed); }
  void record(std::string from, std::string what);

private:
  std::atomic<std::uint64_t> handled_{0};
  std::atomic<bool> tracing_{false};
  std::atomic<std::uint64_t> id_{0};
  std::mutex mtx_;
  std::chrono::steady_clock::time_point started_;
  std::vector<trace_entry> entries_;
  std::uint64_t dropped_ = 0;
};

/// The meters of one host's actors (host_actor_names()), created with the host.
class host_meters {
public:
  /// `others`: actors of the process that send to the host's actors (the link), by id.
  explicit host_meters(std::map<std::uint64_t, std::string> others = {});
  /// The meter of `actor`; null for a name that is not one of the host's actors.
  std::shared_ptr<actor_meter> of(const std::string& actor) const;
  /// The name of the host's actor with this id, or empty.
  std::string name_of(std::uint64_t actor_id) const;

private:
  std::map<std::string, std::shared_ptr<actor_meter>> meters_;
  std::map<std::uint64_t, std::string> others_;
};

/// A brief, bounded description of a message for a trace: "deliver from r1-ohio: activation
/// (16.8 MB)", "tick", "inspect \"flows\"", ... `host` names the senders among the host's actors.
std::string describe_message(const caf::mailbox_element& x, caf::actor_system& sys);
std::string describe_sender(const caf::mailbox_element& x, const host_meters& host, const caf::node_id& here);

/// A host's actor: counts (and, while traced, records) every message it handles.
template <class Base>
class metered : public Base {
public:
  using Base::Base;
  using Base::consume;

  /// Meter this actor with `m` (of host `host`); call first thing in its behavior function.
  void meter(std::shared_ptr<actor_meter> m, std::shared_ptr<const host_meters> host) {
    meter_ = std::move(m);
    host_ = std::move(host);
    if (meter_)
      meter_->bind(this->id());
  }

  caf::invoke_message_result consume(caf::mailbox_element& x) override {
    if (meter_) {
      meter_->count();
      if (meter_->tracing())
        meter_->record(describe_sender(x, *host_, this->node()), describe_message(x, this->system()));
    }
    return Base::consume(x);
  }

private:
  std::shared_ptr<actor_meter> meter_;
  std::shared_ptr<const host_meters> host_;
};

} // namespace gwtf::actors
