// Plain configuration of the runtime of one process: network identity, the virtual hosts it
// runs, fault handling and network emulation. No CAF here: app/ fills these from YAML
// and the test suite checks them without starting an actor system.
#pragma once

#include "common/validation.hpp"

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace gwtf::actors {

/// A parsed "host:port" address ("[::1]:4242" for IPv6).
struct endpoint {
  std::string host;        ///< name or address, without brackets
  std::uint16_t port = 0;  ///< 0 lets the OS pick (listen addresses only)
};

/// Parses "host:port"; nullopt with no host, no port, or a port outside 0..65535.
std::optional<endpoint> parse_endpoint(const std::string& text);

/// The host's cluster identity for mutual TLS (docs/deploy.md): every peer connection is TLS,
/// and both ends must present a certificate that chains to `ca`. Relative paths start at the
/// config file. A host's certificate must name it (SAN URI caf-gwtf:host/NAME): peers bind a
/// connection only to a name its certificate carries.
struct tls_config {
  std::string certificate; ///< PEM certificate (chain) of this host
  std::string key;         ///< PEM private key of the certificate
  std::string ca;          ///< PEM certificate of the cluster CA
  std::string passphrase;  ///< decrypts `key` if it is encrypted; prefer ${ENV} to a literal
  /// A folder as scripts/make-certs writes it: ca.crt and NAME.crt / NAME.key per host. It
  /// stands for whichever of certificate, key and ca are not given, for the host NAME that
  /// runs (one file for every host of `launch`, one Secret for every pod).
  std::string directory;

  /// Reports every missing file name (the files themselves are loaded at start).
  void validate(const issue_sink& report) const;
  /// The files for host `name`: the given ones, the rest from `directory`.
  tls_config for_host(const std::string& name) const;
};

/// True for addresses only this machine can reach: 127.0.0.0/8, ::1 and "localhost".
bool is_loopback_host(const std::string& host);

/// Process-level network settings.
struct node_config {
  std::string listen = "127.0.0.1:0";      ///< address the middleman publishes on; port 0 = any
  std::string advertise;                   ///< address peers dial (NAT, containers); empty = listen
  std::vector<std::string> bootstrap;      ///< "host:port" of peers to join through
  std::string inspect = "127.0.0.1:0";     ///< address of the inspection shell server
  std::string metrics;                     ///< address of the HTTP metrics server; empty = off
  bool inspect_control = false;            ///< the shell may drain or crash this host (lab use)
  std::optional<tls_config> tls;           ///< mutual TLS between hosts; unset: plain TCP
  bool insecure = false;                   ///< allow plain TCP on a non-loopback listen address
  int scheduler_threads = 2;               ///< CAF worker threads (more oversubscribes torch)
  std::int64_t max_message_bytes = 64 << 20; ///< larger wire messages are rejected unread
  /// Tensors larger than this cross the wire in chunks of at most this many bytes (gradient
  /// shares, states, checkpoint copies): no frame is bounded by the model, and a peer's
  /// control messages pass between the chunks. At most half of max_message_bytes is used.
  std::int64_t chunk_bytes = 1 << 20;
  /// node.listen takes at most this many connections at once, and this many from one source
  /// address; above a cap a newcomer displaces the connection idle longest (1 s at least), or
  /// is refused (docs/runtime.md, "Bounded ports").
  int max_connections = 512;
  int max_connections_per_address = 128;
  int idle_timeout_ms = 60000;             ///< a peer connection with no byte in or out this long is closed; 0 = never
  /// Bytes of unfinished frames across all peer connections; above it the connection holding
  /// the most is closed. At least max_message_bytes.
  std::int64_t max_partial_bytes = 128 << 20;
  std::string data_dir;                    ///< checkpoints (docs/checkpoints.md); empty = none
  /// This host's memory budget in MiB (overrides its hosts[].memory_budget_mb); 0 = that one.
  double memory_budget_mb = 0;

  /// Reports every invalid field.
  void validate(const issue_sink& report) const;
};

/// What a virtual host does.
enum class host_role {
  data_holder, ///< owns data; runs stage 0 (embedding, head, loss)
  relay,       ///< computes one relay stage 1..S-1
};

/// Names of `host_role` values as they appear in YAML.
constexpr std::array<std::pair<host_role, const char*>, 2> enum_names(host_role) {
  return {{{host_role::data_holder, "data_holder"}, {host_role::relay, "relay"}}};
}

/// One virtual host run by this process (exactly one on a real cluster machine).
struct host_config {
  std::string name;                   ///< unique host id, [A-Za-z0-9._-]
  std::string region;                 ///< region in the emulated network matrix
  host_role role = host_role::relay;  ///< data holder or relay
  int stage = -1;                     ///< relay stage 1..S-1; -1 = join the bottleneck stage
  int capacity = 4;                   ///< microbatches the host can hold at once
  double compute_scale = 1.0;         ///< emulated slowdown of its compute (2 = half as fast)
  /// Emulated network card: Mbit/s it sends (receives) in all, shared by every link; 0 = no
  /// limit beyond the links'. Node mode honours the uplink only (each host emulates its sends).
  double uplink_mbit = 0;
  double downlink_mbit = 0;
  /// MiB its relay stage's state may keep resident; a stage above it swaps its blocks
  /// through a file (docs/model.md, "Layer swapping"). 0 = no budget.
  double memory_budget_mb = 0;

  /// Reports invalid fields; `stages` is the model's number of pipeline stages.
  void validate(int stages, const issue_sink& report) const;
};

/// Kinds of scripted faults.
enum class fault_action {
  crash,     ///< the host dies without notice
  join,      ///< the host (declared in hosts) comes online
  leave,     ///< the host announces its departure and leaves cleanly
  slow_link, ///< the link host -> peer gets `slowdown` times slower
  actor_failure, ///< one local actor of the host fails; its supervisor restarts it
  hang,      ///< the host stops answering for duration_ms (launch: SIGSTOP, then SIGCONT)
  double_count, ///< the host adds the next microbatch's gradients twice (tests the exactly-once check)
};

/// Names of `fault_action` values as they appear in YAML.
constexpr std::array<std::pair<fault_action, const char*>, 7> enum_names(fault_action) {
  return {{{fault_action::crash, "crash"},
           {fault_action::join, "join"},
           {fault_action::leave, "leave"},
           {fault_action::slow_link, "slow_link"},
           {fault_action::actor_failure, "actor_failure"},
           {fault_action::hang, "hang"},
           {fault_action::double_count, "double_count"}}};
}

/// When inside an iteration a crash strikes.
enum class fault_phase {
  any,      ///< at the start of the iteration
  forward,  ///< while the host computes a forward pass
  backward, ///< while the host computes a backward pass
  averaging, ///< once the host sent its gradient share, before its stage's sum is in
};

/// Names of `fault_phase` values as they appear in YAML.
constexpr std::array<std::pair<fault_phase, const char*>, 4> enum_names(fault_phase) {
  return {{{fault_phase::any, "any"},
           {fault_phase::forward, "forward"},
           {fault_phase::backward, "backward"},
           {fault_phase::averaging, "averaging"}}};
}

/// One scripted fault.
struct fault_event {
  int at_iteration = 0;                    ///< iteration in which it happens
  fault_action action = fault_action::crash; ///< what happens
  std::string host;                        ///< host it happens to
  fault_phase phase = fault_phase::any;    ///< crash only: when inside the iteration
  std::string peer;                        ///< slow_link only: the other end of the link
  double slowdown = 1.0;                   ///< slow_link only: latency and 1/bandwidth factor
  int duration_ms = 0;                     ///< hang only: how long the host is stopped

  /// Reports invalid fields (host names are checked against the host list by the loader).
  void validate(const issue_sink& report) const;
};

/// Failure detection, timeouts, supervision and injected churn.
struct fault_config {
  int heartbeat_interval_ms = 200;  ///< middleman heartbeat; detects hung peers
  int connection_timeout_ms = 800;  ///< a peer silent this long is considered down
  int hop_timeout_ms = 10000;       ///< a forward/backward hop without answer is re-routed
  int max_restarts = 3;             ///< restarts of a failing local actor within the window
  int restart_window_ms = 60000;    ///< window for max_restarts; beyond, the host leaves
  double crash_rate = 0.0;          ///< chance per host and iteration of a random crash
  std::vector<fault_event> script;  ///< scripted faults, in any order

  /// Reports every invalid field.
  void validate(const issue_sink& report) const;
};

/// Emulated geo network between the virtual hosts of this process.
struct emulation_config {
  std::string network;       ///< network matrix file; relative paths start at the config file
  double time_scale = 1.0;   ///< emulated delays are multiplied by this (0.1 = 10x faster; 0 = none)

  /// Reports every invalid field.
  void validate(const issue_sink& report) const;
};

template <class F>
void visit_fields(F& f, node_config& x) {
  f("listen", x.listen);
  f("advertise", x.advertise);
  f("bootstrap", x.bootstrap);
  f("inspect", x.inspect);
  f("metrics", x.metrics);
  f("inspect_control", x.inspect_control);
  f("tls", x.tls);
  f("insecure", x.insecure);
  f("scheduler_threads", x.scheduler_threads);
  f("max_message_bytes", x.max_message_bytes);
  f("chunk_bytes", x.chunk_bytes);
  f("max_connections", x.max_connections);
  f("max_connections_per_address", x.max_connections_per_address);
  f("idle_timeout_ms", x.idle_timeout_ms);
  f("max_partial_bytes", x.max_partial_bytes);
  f("data_dir", x.data_dir);
  f("memory_budget_mb", x.memory_budget_mb);
}

template <class F>
void visit_fields(F& f, tls_config& x) {
  f("certificate", x.certificate);
  f("key", x.key);
  f("ca", x.ca);
  f("passphrase", x.passphrase);
  f("directory", x.directory);
}

template <class F>
void visit_fields(F& f, host_config& x) {
  f("name", x.name);
  f("region", x.region);
  f("role", x.role);
  f("stage", x.stage);
  f("capacity", x.capacity);
  f("compute_scale", x.compute_scale);
  f("memory_budget_mb", x.memory_budget_mb);
  f("uplink_mbit", x.uplink_mbit);
  f("downlink_mbit", x.downlink_mbit);
}

template <class F>
void visit_fields(F& f, fault_event& x) {
  f("at_iteration", x.at_iteration);
  f("action", x.action);
  f("host", x.host);
  f("phase", x.phase);
  f("peer", x.peer);
  f("slowdown", x.slowdown);
  f("duration_ms", x.duration_ms);
}

template <class F>
void visit_fields(F& f, fault_config& x) {
  f("heartbeat_interval_ms", x.heartbeat_interval_ms);
  f("connection_timeout_ms", x.connection_timeout_ms);
  f("hop_timeout_ms", x.hop_timeout_ms);
  f("max_restarts", x.max_restarts);
  f("restart_window_ms", x.restart_window_ms);
  f("crash_rate", x.crash_rate);
  f("script", x.script);
}

template <class F>
void visit_fields(F& f, emulation_config& x) {
  f("network", x.network);
  f("time_scale", x.time_scale);
}

/// How long a plain query of the shell may take to be answered (the inspection server's wait,
/// a host gathering its actors' state, a query relayed to a peer): two heartbeats, at least a
/// second. The one home of this rule.
inline int answer_budget_ms(const fault_config& f) {
  return f.heartbeat_interval_ms * 2 > 1000 ? f.heartbeat_interval_ms * 2 : 1000;
}

} // namespace gwtf::actors
