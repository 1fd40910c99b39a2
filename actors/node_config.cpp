#include "actors/node_config.hpp"

#include <cctype>
#include <cmath>

namespace gwtf::actors {

namespace {

void check_endpoint(const issue_sink& report, const std::string& key, const std::string& text,
                    bool port_zero_ok) {
  auto ep = parse_endpoint(text);
  if (!ep)
    report(key, "an address 'host:port' with a port in 0..65535, got '" + text + "'");
  else if (!port_zero_ok && ep->port == 0)
    report(key, "a peer address with a non-zero port, got '" + text + "'");
}

} // namespace

std::optional<endpoint> parse_endpoint(const std::string& text) {
  std::string host;
  std::string port;
  if (!text.empty() && text.front() == '[') { // [v6]:port
    auto close = text.find(']');
    if (close == std::string::npos || close + 1 >= text.size() || text[close + 1] != ':')
      return std::nullopt;
    host = text.substr(1, close - 1);
    port = text.substr(close + 2);
  } else {
    auto colon = text.rfind(':');
    if (colon == std::string::npos || text.find(':') != colon)
      return std::nullopt;
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
  }
  if (host.empty() || port.empty() || port.size() > 5)
    return std::nullopt;
  for (char c : host)
    if (std::isspace(static_cast<unsigned char>(c)))
      return std::nullopt;
  unsigned long value = 0;
  for (char c : port) {
    if (!std::isdigit(static_cast<unsigned char>(c)))
      return std::nullopt;
    value = value * 10 + static_cast<unsigned long>(c - '0');
  }
  if (value > 65535)
    return std::nullopt;
  return endpoint{host, static_cast<std::uint16_t>(value)};
}

bool is_loopback_host(const std::string& host) {
  if (host == "localhost" || host == "::1" || host == "0:0:0:0:0:0:0:1")
    return true;
  auto dot = host.find('.');
  if (host.rfind("127.", 0) != 0 || dot != 3)
    return false;
  int parts = 0;
  for (std::size_t i = 0; i <= host.size(); ++i) {
    std::size_t j = host.find('.', i);
    auto part = host.substr(i, j == std::string::npos ? std::string::npos : j - i);
    if (part.empty() || part.size() > 3 || part.find_first_not_of("0123456789") != std::string::npos
        || std::stoi(part) > 255)
      return false;
    ++parts;
    if (j == std::string::npos)
      break;
    i = j;
  }
  return parts == 4;
}

void tls_config::validate(const issue_sink& report) const {
  if (!directory.empty())
    return; // it holds whatever is not named
  if (certificate.empty())
    report("certificate", "the PEM certificate of this host (scripts/make-certs makes a lab CA and host certificates), "
                          "or node.tls.directory");
  if (key.empty())
    report("key", "the PEM private key of the certificate, or node.tls.directory");
  if (ca.empty())
    report("ca", "the PEM certificate of the cluster CA, or node.tls.directory");
}

tls_config tls_config::for_host(const std::string& name) const {
  auto out = *this;
  if (directory.empty())
    return out;
  auto in_dir = [this](const std::string& file) { return directory + (directory.back() == '/' ? "" : "/") + file; };
  if (out.certificate.empty())
    out.certificate = in_dir(name + ".crt");
  if (out.key.empty())
    out.key = in_dir(name + ".key");
  if (out.ca.empty())
    out.ca = in_dir("ca.crt");
  return out;
}

void node_config::validate(const issue_sink& report) const {
  check_endpoint(report, "listen", listen, true);
  check_real(report, "memory_budget_mb", memory_budget_mb, 0, bound::closed, 1e9, bound::closed,
             "MiB, 0 = the host's hosts[].memory_budget_mb");
  if (tls)
    tls->validate([&](const std::string& k, const std::string& e) { report("tls." + k, e); });
  // Plain TCP on a reachable address lets anyone speak to the middleman or the shell's
  // server: only with mutual TLS, or on request.
  for (auto [key, text] : {std::pair<const char*, const std::string*>{"listen", &listen}, {"inspect", &inspect}}) {
    auto ep = parse_endpoint(*text);
    if (ep && !is_loopback_host(ep->host) && !insecure && !tls)
      report(key, std::string{"a loopback address, got '"} + *text + "': a non-loopback " + key
                    + " address needs node.tls (mutual TLS, docs/deploy.md; or reach a loopback "
                    + (std::string{key} == "listen" ? "port" : "shell port through an SSH tunnel or kubectl port-forward")
                    + "), or node.insecure: true to accept plain TCP from anyone who can reach it");
  }
  check_endpoint(report, "inspect", inspect, true);
  if (!metrics.empty())
    check_endpoint(report, "metrics", metrics, true);
  if (!advertise.empty())
    check_endpoint(report, "advertise", advertise, true);
  for (std::size_t i = 0; i < bootstrap.size(); ++i)
    check_endpoint(report, "bootstrap[" + std::to_string(i) + "]", bootstrap[i], false);
  check_int(report, "scheduler_threads", scheduler_threads, 1, 256, "a number of threads");
  // A frame's size is 32 bits on the wire (actors/net/peer_framing.hpp).
  check_int(report, "max_message_bytes", max_message_bytes, 4096, (std::int64_t{1} << 32) - 1,
            "a message size limit in bytes");
  check_int(report, "chunk_bytes", chunk_bytes, 1024, std::int64_t{1} << 31, "a chunk size in bytes");
  check_int(report, "max_connections", max_connections, 1, 1'000'000, "a number of connections");
  check_int(report, "max_connections_per_address", max_connections_per_address, 1, 1'000'000,
            "a number of connections");
  if (max_connections_per_address > max_connections)
    report("max_connections_per_address", "at most max_connections (" + std::to_string(max_connections) + "), got "
                                            + std::to_string(max_connections_per_address));
  check_int(report, "idle_timeout_ms", idle_timeout_ms, 0, 86'400'000, "milliseconds, 0 = never");
  if (idle_timeout_ms > 0 && idle_timeout_ms < 1000)
    report("idle_timeout_ms", "0 (never) or at least 1000 (peers talk every heartbeat, but not faster), got "
                                + std::to_string(idle_timeout_ms));
  check_int(report, "max_partial_bytes", max_partial_bytes, 4096, std::int64_t{1} << 40, "a number of bytes");
  if (max_partial_bytes < max_message_bytes)
    report("max_partial_bytes", "at least max_message_bytes (" + std::to_string(max_message_bytes)
                                  + ": one whole message must fit), got " + std::to_string(max_partial_bytes));
}

void host_config::validate(int stages, const issue_sink& report) const {
  if (!is_host_name(name))
    report("name", "a host name of 1-64 characters from [A-Za-z0-9._-], got '" + name + "'");
  if (role == host_role::data_holder) {
    if (stage != -1 && stage != 0)
      report("stage", "0 or no stage for a data_holder (data holders run stage 0), got "
                        + std::to_string(stage));
  } else if (stage != -1 && (stage < 1 || stage >= stages)) {
    report("stage", "a relay stage in [1, " + std::to_string(stages - 1)
                      + "] (model.stages = " + std::to_string(stages)
                      + "), or -1 to join the bottleneck stage, got " + std::to_string(stage));
  }
  check_int(report, "capacity", capacity, 1, 1'000'000, "a number of microbatches");
  check_real(report, "compute_scale", compute_scale, 0, bound::open, 1e6, bound::closed,
             "a slowdown factor");
  check_real(report, "uplink_mbit", uplink_mbit, 0, bound::closed, 1e7, bound::closed, "Mbit/s, 0 = no limit");
  check_real(report, "downlink_mbit", downlink_mbit, 0, bound::closed, 1e7, bound::closed, "Mbit/s, 0 = no limit");
  check_real(report, "memory_budget_mb", memory_budget_mb, 0, bound::closed, 1e9, bound::closed, "MiB, 0 = no budget");
}

void fault_event::validate(const issue_sink& report) const {
  check_int(report, "at_iteration", at_iteration, 0, 100'000'000, "an iteration");
  if (host.empty())
    report("host", "the name of the host the fault happens to");
  if (action != fault_action::crash && phase != fault_phase::any)
    report("phase", "'any' (phase applies to crash only)");
  if (action == fault_action::slow_link) {
    if (peer.empty())
      report("peer", "the host at the other end of the slow link");
    else if (peer == host)
      report("peer", "a host other than '" + host + "'");
    check_real(report, "slowdown", slowdown, 1, bound::closed, 1e6, bound::closed, "a factor");
  } else {
    if (!peer.empty())
      report("peer", "no peer (peer applies to slow_link only)");
    if (slowdown != 1.0)
      report("slowdown", "no slowdown (slowdown applies to slow_link only)");
  }
  if (action == fault_action::hang)
    check_int(report, "duration_ms", duration_ms, 1, 3'600'000, "how long the host hangs, in milliseconds");
  else if (duration_ms != 0)
    report("duration_ms", "no duration (duration_ms applies to hang only)");
}

void fault_config::validate(const issue_sink& report) const {
  check_int(report, "heartbeat_interval_ms", heartbeat_interval_ms, 1, 3'600'000,
            "a heartbeat period in milliseconds");
  check_int(report, "connection_timeout_ms", connection_timeout_ms, 1, 3'600'000,
            "a timeout in milliseconds");
  if (connection_timeout_ms <= heartbeat_interval_ms)
    report("connection_timeout_ms", "more than heartbeat_interval_ms ("
                                      + std::to_string(heartbeat_interval_ms) + "), got "
                                      + std::to_string(connection_timeout_ms));
  check_int(report, "hop_timeout_ms", hop_timeout_ms, 1, 3'600'000, "a timeout in milliseconds");
  check_int(report, "max_restarts", max_restarts, 0, 1'000'000, "a number of restarts");
  check_int(report, "restart_window_ms", restart_window_ms, 1, 86'400'000,
            "a window in milliseconds");
  check_real(report, "crash_rate", crash_rate, 0, bound::closed, 1, bound::closed, "a probability");
  for (std::size_t i = 0; i < script.size(); ++i)
    script[i].validate([&](const std::string& k, const std::string& e) {
      report("script[" + std::to_string(i) + "]." + k, e);
    });
}

void emulation_config::validate(const issue_sink& report) const {
  if (network.empty())
    report("network", "the path of a network matrix file (see configs/networks/)");
  check_real(report, "time_scale", time_scale, 0, bound::closed, 1e6, bound::closed, "a factor (0: no emulated delay)");
}

} // namespace gwtf::actors
