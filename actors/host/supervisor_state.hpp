// Internal to actors/host/: the supervisor's state, shared by the supervisor
// (supervisor.cpp) and the shell's gateway it runs (host_inspect.cpp).
#pragma once

#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "actors/host/host_actors.hpp"
#include "actors/inspect/inspect_view.hpp"

namespace gwtf::actors {

struct supervisor_state {
  ctx_ptr ctx;
  membership_actor membership;
  probe_actor probe;
  balancer_actor balancer;
  compute_actor compute;
  std::deque<std::int64_t> restarts; // times of the restarts inside the window
  std::uint64_t generation = 0;      // restarts so far: raises the incarnation
  bool leaving = false;
  bool left = false; // LEAVE sent
  // SWARM's rebalancing: the stage this host moves to once it drained, and the moves so far
  // (the drain's deadline names its move).
  std::optional<std::int32_t> moving_to;
  std::string move_why;
  std::uint64_t moves = 0;
  // A relay without a declared stage: membership polls until its view settles.
  int place_polls = 0;
  std::size_t place_seen = 0;
  // The shell: traces running (by serial), queries relayed to peers (by request id), and
  // how many peers' queries this host is answering now.
  struct trace_run {
    caf::typed_response_promise<std::string> promise;
    trace_request request;
    std::shared_ptr<actor_meter> meter;
    std::uint64_t handled_before = 0;
  };
  struct relayed {
    caf::typed_response_promise<std::string> promise;
    std::string host;
  };
  std::map<std::uint64_t, trace_run> traces;
  std::map<std::uint64_t, relayed> relays;
  std::uint64_t next_serial = 0;
  int answering = 0;
};

using supervisor_ptr = metered_ptr<supervisor_actor, supervisor_state>;

/// The shell's query to this host (host_inspect.cpp): a hop to a peer (@HOST), a trace, a lab
/// control, or a view of every actor of the host.
caf::result<std::string> inspect(supervisor_ptr self, const std::string& query);

/// A peer's INSPECT_REQUEST (its shell's `use`) or the answer to one this host relayed.
void on_inspect_frame(supervisor_ptr self, const std::string& from, wire_frame&& frame);

} // namespace gwtf::actors
