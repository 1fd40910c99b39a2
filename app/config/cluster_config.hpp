// The whole configuration of one caf-gwtf process (cluster.yaml), and its loader.
#pragma once

#include <array>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "actors/node_config.hpp"
#include "model/model_config.hpp"
#include "routing/compression.hpp"
#include "routing/dtfm.hpp"
#include "routing/network.hpp"
#include "routing/routing_config.hpp"

namespace gwtf::app {

/// Where relays declared without a stage go at cluster start (docs/config.md, placement).
enum class placement_policy { gwtf, dtfm };

constexpr std::array<std::pair<placement_policy, const char*>, 2> enum_names(placement_policy) {
  return {{{placement_policy::gwtf, "gwtf"}, {placement_policy::dtfm, "dtfm"}}};
}

struct placement_config {
  /// gwtf: each to the bottleneck stage (routing::place_unstaged); dtfm: DT-FM's cost model
  /// and evolutionary search over the founding stage-less relays (routing/dtfm.hpp). Joiners
  /// go to the bottleneck stage either way.
  placement_policy policy = placement_policy::gwtf;
  /// dtfm: the region matrix (configs/networks format) its cost model reads; empty: the
  /// emulation.network matrix.
  std::string network;
  /// Node mode: the relays that found the cluster (stage-less or not). A founding relay
  /// without a stage places itself once it sees this many relays and every data holder of
  /// training.data_holders, so all of them place from the same view (DT-FM's partition is
  /// the same everywhere only then); 0: once its view has settled (the same live peers at
  /// three heartbeats in a row), which a host slow to start can miss. `launch` sets it.
  int relays = 0;
  /// Node mode with `relays`: the longest a founding relay waits for them (from its first
  /// look at its view); then it places itself from what it sees, and logs who was missing.
  int wait_ms = 60000;

  template <class Report>
  void validate(Report&& report) const {
    if (relays < 0 || relays > 4096)
      report("relays", "a relay count in [0, 4096], got " + std::to_string(relays));
    if (wait_ms < 0 || wait_ms > 3600000)
      report("wait_ms", "milliseconds in [0, 3600000], got " + std::to_string(wait_ms));
  }
};

template <class F>
void visit_fields(F& f, placement_config& x) {
  f("policy", x.policy);
  f("network", x.network);
  f("relays", x.relays);
  f("wait_ms", x.wait_ms);
}

/// How activations and their gradients travel between stages (docs/config.md, compression).
enum class compression_mode { off, fp16, bf16, adaptive };

constexpr std::array<std::pair<compression_mode, const char*>, 4> enum_names(compression_mode) {
  return {{{compression_mode::off, "off"},
           {compression_mode::fp16, "fp16"},
           {compression_mode::bf16, "bf16"},
           {compression_mode::adaptive, "adaptive"}}};
}

/// Which links adaptive compression may sparsify (routing/compression.hpp: the simulator's
/// scenarios share it).
using routing::compression_links;

struct compression_config {
  /// off: fp32 as computed; fp16 / bf16: rounded to 16 bits for the wire (half the bytes),
  /// back to fp32 at the receiver; adaptive: fp16, and on a link slower than the receiver's
  /// compute only the top-k values with their positions (routing/compression.hpp), with
  /// error feedback for gradients. Gradient shares between replicas stay fp32.
  compression_mode mode = compression_mode::off;
  /// adaptive: the fewest values a sparse tensor keeps, as a fraction, in (0, 1]
  double min_density = 0.1;
  /// adaptive: slow (links whose dense transfer outlasts the receiver's compute) or all
  /// (every link at min_density: for experiments)
  compression_links links = compression_links::slow;

  template <class Report>
  void validate(Report&& report) const {
    if (!(min_density > 0 && min_density <= 1))
      report("min_density", "a fraction in (0, 1], got " + std::to_string(min_density));
  }
};

template <class F>
void visit_fields(F& f, compression_config& x) {
  f("mode", x.mode);
  f("min_density", x.min_density);
  f("links", x.links);
}

/// Every section of cluster.yaml. Sections other than `hosts` may be left out.
struct cluster_config {
  actors::node_config node;                     ///< network identity of this process
  std::vector<actors::host_config> hosts;       ///< virtual hosts run by this process
  model::model_config model;                    ///< model shape and stage count
  model::data_config data;                      ///< corpus (needed when a data holder runs here)
  model::training_config training;              ///< loop, optimizer, schedule
  routing::routing_config routing;              ///< router and its constants
  actors::fault_config faults;                  ///< failure detection, supervision, churn
  std::optional<actors::emulation_config> emulation; ///< emulated geo network, if any
  placement_config placement;                   ///< stage placement of stage-less relays
  compression_config compression;               ///< activations on the wire

  /// The network matrix named by `emulation.network`, loaded with the config.
  std::optional<routing::network_matrix> network;
  /// placement.policy dtfm: the matrix its cost model reads (placement.network, else `network`).
  std::optional<routing::network_matrix> placement_network;
};

template <class F>
void visit_fields(F& f, cluster_config& x) {
  f("node", x.node);
  f("hosts", x.hosts);
  f("model", x.model);
  f("data", x.data);
  f("training", x.training);
  f("routing", x.routing);
  f("faults", x.faults);
  f("emulation", x.emulation);
  f("placement", x.placement);
  f("compression", x.compression);
}

/// One rejected value: where it is and what was expected.
struct config_error {
  std::string file;  ///< file as given by the user
  int line = 0;      ///< 1-based; 0 when unknown
  int column = 0;    ///< 1-based; 0 when unknown
  std::string key;   ///< key path, e.g. "hosts[2].stage"; empty for the whole file
  std::string message;

  /// "file:line:column: key: message".
  std::string to_string() const;
};

/// Outcome of loading: the config, or every error found (never both).
struct load_result {
  std::optional<cluster_config> config;
  std::vector<config_error> errors;
};

/// Looks up an environment variable; nullopt when it is not set.
using env_lookup = std::function<std::optional<std::string>(const std::string&)>;

/// What a config gets besides its file's text (docs/config.md, "Overrides and environment").
struct config_overrides {
  /// `--set KEY=VALUE` arguments, applied in order after the file, e.g. "node.advertise=a:1",
  /// "hosts[0].stage=2", "node.bootstrap=[a:1, b:2]" (the value is read as YAML).
  std::vector<std::string> sets;
  /// Resolves `${NAME}` and `${NAME:-default}` in the file's values; empty: the process
  /// environment.
  env_lookup env;
};

/// Reads, type-checks and validates a cluster.yaml, and the network matrix it names.
/// Relative paths in it are resolved against the file's directory. `${NAME}` in a value is
/// replaced by the environment variable NAME, then `extra.sets` override keys; an error in a
/// value that came from --set names that argument instead of a line of the file.
load_result load_cluster_config(const std::filesystem::path& file, const config_overrides& extra = {});

/// Same, from text; `file` labels errors, `base_dir` resolves relative paths.
load_result parse_cluster_config(const std::string& text, const std::string& file,
                                 const std::filesystem::path& base_dir,
                                 const config_overrides& extra = {});

/// `text` with `${NAME}` replaced by NAME's value, `${NAME:-default}` by the value or, when
/// NAME is unset or empty, by `default`, and `$$` by `$`; any other `$` stays. nullopt with
/// `why` for an unset NAME without default or a malformed `${...}`.
std::optional<std::string> expand_env(const std::string& text, const env_lookup& env, std::string& why);

/// Outcome of loading a network matrix file.
struct network_result {
  std::optional<routing::network_matrix> network;
  std::vector<config_error> errors;
};

/// Reads and validates a network matrix file (format of configs/networks/*.yaml).
network_result load_network_matrix(const std::filesystem::path& file);

/// The resolved config as YAML, every default written out (input to the loader again).
std::string to_yaml(const cluster_config& cfg);

/// Every key path the config accepts, e.g. "training.lr", "hosts[].stage".
std::vector<std::string> config_key_paths();

} // namespace gwtf::app
