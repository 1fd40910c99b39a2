// What the inspection shell sees of a host (docs/shell.md), as a pure function: the host's
// actors answer with their state as JSON objects; a query picks and combines them into the
// answer. No CAF, no sockets: testable on its own.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace gwtf::actors {

/// A host's state as its actors reported it.
struct inspect_parts {
  std::string host;                         ///< the host's name
  std::map<std::string, std::string> parts; ///< actor ("supervisor", "membership", "probe",
                                            ///< "balancer", "compute") -> its JSON object
  std::map<std::string, std::string> missing; ///< actor -> why it did not answer
};

/// The queries a host answers, with a line of help each, in the order `help` lists them.
const std::vector<std::pair<std::string, std::string>>& inspect_queries();

/// The lab controls (obeyed only with node.inspect_control: true), with a line of help each.
const std::vector<std::pair<std::string, std::string>>& control_queries();

/// The host's actors as `actors` and `inspect ACTOR` name them.
const std::vector<std::string>& host_actor_names();
/// The same, comma-separated, for messages.
std::string host_actor_list();

/// Whether `query` is a lab control.
bool is_control(const std::string& query);

/// `slow-link PEER FACTOR`, checked: FACTOR a number in [1, 1000].
struct slow_link_request {
  std::string peer;
  double factor = 1;
};
std::variant<slow_link_request, std::string> parse_slow_link(const std::string& query);

/// `trace ACTOR [SECONDS]`: the messages one of the host's actors handles for SECONDS
/// (default 5, at most max_trace_seconds).
struct trace_request {
  std::string actor;
  int seconds = 5;
};
constexpr int max_trace_seconds = 60;
std::variant<trace_request, std::string> parse_trace(const std::string& query);

/// `@HOST QUERY`: a query for another host of the cluster, asked over the cluster's links by
/// the host the shell is attached to (the shell's `use HOST`).
struct hop_request {
  std::string host;
  std::string query;
};
/// Not a hop: nullopt. A hop without a host or query, or a hop of a hop: the error.
std::optional<std::variant<hop_request, std::string>> parse_hop(const std::string& query);

/// The embedded cluster's shell (several hosts in one process, one inspect port): which of
/// its hosts answers `query` and what it is asked. A plain query goes to `attached` (or, when
/// that host is gone, the first of `live`), `@HOST QUERY` to HOST. Lab controls act on the
/// host they name and need `control`; `crash` becomes that host's crash alone ("crash any":
/// the process holds the others too).
struct front_route {
  std::string host;
  std::string query;
};
std::variant<front_route, std::string> route_front(const std::string& query, const std::string& attached,
                                                   const std::vector<std::string>& live, bool control);

/// How much longer than a plain query `query` may take to answer, in ms (a trace's seconds).
int extra_answer_ms(const std::string& query);

/// The answer to a trace: what the actor handled while traced.
struct traced_message {
  std::int64_t at_us = 0;
  std::string from, what;
};
std::string compose_trace(const std::string& host, const trace_request& t, std::uint64_t handled,
                          const std::vector<traced_message>& messages, std::uint64_t dropped);

/// The answer to `query`: a JSON document (ok), or an error that names the query and what
/// is wrong (not ok).
struct inspect_answer {
  bool ok = false;
  std::string body;
};
inspect_answer compose_view(const std::string& query, const inspect_parts& parts);

} // namespace gwtf::actors
