// The inspection shell (`caf-gwtf shell HOST:PORT`, docs/shell.md): asks one host's
// inspection server (node.inspect) and prints the answers, interactively with line editing,
// history and completion, or for one command (-c). Every connect and every answer is bounded
// by a timeout: a dead or hung host is a one-line error, never a hang.
#pragma once

#include <iosfwd>
#include <string>

#include "app/cli.hpp"

namespace gwtf::app {

/// Renders a host's JSON answer to `query` for a person: scalars as `key: value` lines,
/// lists of objects as aligned tables, the graph as DOT text. Input that is not JSON is
/// returned as it is.
std::string render_answer(const std::string& query, const std::string& json_text);

/// Runs the shell; returns the exit code (0, 1 when a command failed or the host could not
/// be reached, 2 for a bad HOST:PORT).
int run_shell(const cli_options& opts, std::ostream& out, std::ostream& err);

} // namespace gwtf::app
