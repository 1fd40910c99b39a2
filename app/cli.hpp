// Command-line parsing of caf-gwtf: pure, so every path is tested without spawning.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <utility>
#include <string>
#include <variant>
#include <vector>

namespace gwtf::app {

/// What the user asked for.
enum class cli_action {
  help,    ///< print usage, exit 0
  version, ///< print versions of caf-gwtf and its libraries, exit 0
  check,   ///< validate the config and print it resolved, exit 0 or 1
  node,    ///< run the hosts the config declares
  reference, ///< train the unpartitioned model in this process (correctness oracle)
  sim,       ///< discrete-event simulation of a scenario: GWTF vs SWARM vs the optimum
  compare,   ///< one cluster config per router and seed in the real trainer, side by side
  launch,    ///< one process per host of a multi-host config on 127.0.0.1, faults as signals
  shell,     ///< the inspection shell of a running host (interactive, or -c COMMAND)
  export_hf, ///< write a checkpoint cut as a Hugging Face model directory
  eval,      ///< the loss of a checkpoint cut on a deterministic held-out batch
  import_hf, ///< a Hugging Face model directory as checkpoints of iteration 0
};

/// Parsed command line.
struct cli_options {
  cli_action action = cli_action::help; ///< what to do
  std::string config;                   ///< --config FILE
  std::vector<std::string> sets;        ///< --set KEY=VALUE overrides of the config, in order
  std::string scenario;                 ///< sim: --scenario FILE
  std::vector<std::string> routers;     ///< sim: --router gwtf|swarm|swarm-restart|centralized|all, expanded; compare: --routers
  int seeds = 1;                        ///< compare: --seeds N
  bool launch_hosts = false;            ///< compare: --launch (one process per host)
  std::optional<std::uint64_t> seed;    ///< sim: --seed N (overrides the scenario's)
  std::string out;                      ///< sim: --out DIR (empty: sim-results/<name>-seed<N>); compare: (empty: compare-results/<config's name>)
  bool join = false;                    ///< node: --join (enter a running cluster)
  bool resume = false;                  ///< node, embedded, launch: --resume (from checkpoints)
  std::optional<std::uint64_t> resume_at; ///< --resume-at N: from the checkpoints of iteration N
  std::optional<std::uint64_t> until;   ///< --until N: stop after N iterations applied
  std::string report;                   ///< node: --report HOST:PORT (used by launch)
  std::string logs;                     ///< launch: --logs DIR (empty: launch-logs/<time>)
  std::string target;                   ///< shell: HOST:PORT of a host's node.inspect
  std::string command;                  ///< shell: -c COMMAND (empty: interactive)
  bool json = false;                    ///< shell: --json (raw JSON answers)
  int timeout_ms = 3000;                ///< shell: --timeout-ms N, per connect and per answer
  std::string cert, key, ca;            ///< shell: --cert --key --ca, mutual TLS with a host with node.tls
  std::string checkpoint;               ///< export, eval: --checkpoint DIR (data_dirs of hosts side by side)
  std::optional<std::uint64_t> iteration; ///< export, eval: --iteration N (default: the newest cut)
  std::string batch_out;                ///< eval: --batch-out FILE (the batch's tokens and loss as JSON)
  std::string from;                     ///< import: --from DIR (a Hugging Face model directory)
  /// sim --from-config: --compute-ms HOLDER,RELAY, a microbatch's compute at compute_scale 1
  /// (milliseconds; unset: measured on this machine)
  std::optional<std::pair<double, double>> compute_ms;
};

/// A usage error: one line, exit code 2.
struct cli_error {
  std::string message;
};

/// Parses argv[1..]; never exits or prints.
std::variant<cli_options, cli_error> parse_cli(const std::vector<std::string>& args);

/// The arguments a node process starts again with after a restore of a lost stage
/// (docs/checkpoints.md): `args` without --join, --resume, --resume-at N and the stage an
/// earlier restore set, plus `--resume-at iteration` and, when `stage` >= 0 (a relay),
/// `--set hosts[0].stage=stage`.
std::vector<std::string> restore_arguments(const std::vector<std::string>& args, std::uint64_t iteration,
                                           std::int32_t stage);

/// The --help text.
std::string usage_text();

/// Process exit codes.
namespace exit_code {
constexpr int ok = 0;         ///< success
constexpr int failure = 1;    ///< the command ran and failed (e.g. invalid config)
constexpr int usage = 2;      ///< bad command line or unreadable input file
/// Internal to node mode: the host was frozen past the connection timeout and starts again
/// as a new process (run_node's caller re-executes itself with --join; never an exit code).
constexpr int rejoin = 3;
/// Internal to node mode: a lost stage is being restored; run_node's caller re-executes itself
/// with restore_arguments (never an exit code).
constexpr int restore = 4;
/// An embedded or launched run completed, but its driver's outside checks failed: an
/// exactly-once violation or a replica disagreement (docs/runtime.md, "Outside checks").
constexpr int check_failed = 5;
} // namespace exit_code

/// What a run of the embedded cluster or `launch` ended with, for its exit code.
struct run_outcome {
  bool completed = false;
  std::vector<std::string> failures, violations, disagreements;
};

/// The exit code of a run: ok, failure (did not complete; its failures said on `err`) or
/// check_failed (completed with exactly-once violations or replica disagreements, each said).
int run_exit_code(const run_outcome& r, std::ostream& err);

} // namespace gwtf::app
