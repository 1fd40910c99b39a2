// What the inspection shell sees of a host (docs/shell.md), as a pure function: the host's
// actors answer with their state as JSON objects; a query picks and combines them into the
// answer. No CAF, no sockets: testable on its own.
#pragma once

#include <map>
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

/// Whether `query` is a lab control.
/// The host's actors as `actors` and `inspect ACTOR` name them.
const std::vector<std::string>& host_actor_names();
/// The same, comma-separated, for messages.
std::string host_actor_list();

bool is_control(const std::string& query);

/// `slow-link PEER FACTOR`, checked: FACTOR a number in [1, 1000].
struct slow_link_request {
  std::string peer;
  double factor = 1;
};
std::variant<slow_link_request, std::string> parse_slow_link(const std::string& query);

/// The answer to `query`: a JSON document (ok), or an error that names the query and what
/// is wrong (not ok).
struct inspect_answer {
  bool ok = false;
  std::string body;
};
inspect_answer compose_view(const std::string& query, const inspect_parts& parts);

} // namespace gwtf::actors
