#include "actors/system_setup.hpp"

#include <chrono>

#include <caf/io/middleman.hpp>
#include <caf/timespan.hpp>

#include "actors/errors.hpp"
#include "actors/net/wire_frame.hpp"

namespace gwtf::actors {

system_config::system_config(const node_config& node, const fault_config& faults,
                             bool with_network, bool serve) {
  using std::chrono::milliseconds;
  // Torch-heavy handlers: the default 4-thread pool doubled round trips on 2 cores.
  set("scheduler.max-threads", static_cast<size_t>(node.scheduler_threads));
  // One message per turn: a compute actor's torch handler takes tens of milliseconds, and
  // heartbeats queued behind a batch of them made healthy peers look dead on a busy machine.
  set("scheduler.max-throughput", size_t{1});
  // An idle worker goes from its short spin straight to waiting on its condition variable
  // (woken by the next enqueue). CAF's default moderate phase sleeps 50 us at a time for 500
  // rounds: with one process per host on shared cores, those wake-ups took a third of the CPU
  // (docs/benchmarks.md, node mode).
  set("work-stealing.moderate-poll-attempts", size_t{0});
  // One read per ready socket per turn of the I/O loop (CAF's default: up to 50): a
  // connection streaming a gradient share must not hold the loop while heartbeats wait on
  // the others (node mode at 85.6M parameters: 10-26 false deaths per run with 50, none with 1;
  // docs/benchmarks.md).
  set("middleman.max-consecutive-reads", size_t{1});
  // Hung peers (SIGSTOP) are never detected unless both are set.
  set("middleman.heartbeat-interval",
      caf::timespan{milliseconds{faults.heartbeat_interval_ms}});
  set("middleman.connection-timeout",
      caf::timespan{milliseconds{faults.connection_timeout_ms}});
  add_error_category(error_category, [](std::uint8_t code, caf::atom_value,
                                        const caf::message& ctx) {
    std::string out = "gwtf: " + to_string(static_cast<ec>(code));
    if (ctx.match_elements<std::string>())
      out += " (" + ctx.get_as<std::string>(0) + ")";
    else if (!ctx.empty())
      out += " " + caf::to_string(ctx);
    return out;
  });
  // Everything that crosses hosts is a wire_frame of Cap'n Proto bytes (docs/wire.md).
  add_message_type<wire_frame>("gwtf::wire_frame");
  add_message_type<std::vector<std::uint64_t>>("std::vector<std::uint64_t>");
  // Node mode's TLS ends in the net guard both ways (actors/net/tls_session.hpp), not in CAF's
  // openssl module: the guard checks the frames inside.
  if (serve || with_network)
    load<caf::io::middleman>();
}

} // namespace gwtf::actors
