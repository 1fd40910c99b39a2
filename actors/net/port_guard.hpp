// The admission rules of a listening port, as a pure core (no CAF, no sockets, time passed
// in): every port a node listens on (peers, the shell, metrics) takes strangers' connections,
// and each of them costs a file descriptor and memory. docs/runtime.md, "Bounded ports".
//
// - At most `max_connections` accepted connections at once, and at most `max_per_address`
//   from one source address. A newcomer above a cap takes the place of the least recently
//   active connection (of its address when its address is full) if that one has moved no
//   byte for `evictable_after`; otherwise the newcomer is refused. Honest peers talk every
//   heartbeat, so an idle flood only ever displaces itself.
// - A connection that has not finished its handshake (TLS, the framing's hello, a whole HTTP
//   request: the port says what) within `handshake_timeout` is expired, and so is one that
//   moved no byte for `idle_timeout` (0: never).
// - `refusal_log` turns refusals into log lines, at most one per source address and window,
//   the next one counting what it held back, so a flood costs a few lines.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace gwtf::actors {

struct port_limits {
  std::size_t max_connections = 512;
  std::size_t max_per_address = 128;
  std::chrono::milliseconds handshake_timeout{10000};
  std::chrono::milliseconds idle_timeout{0}; ///< 0: none
  std::chrono::milliseconds evictable_after{1000};
};

/// "a.b.c.d:port" or "[v6]:port" -> the address without the port (the text itself otherwise).
/// The lines of a guarded port name it: "PORT: closed the connection from ADDRESS: why".
std::string source_address(const std::string& address_and_port);

class port_guard {
public:
  using time_point = std::chrono::steady_clock::time_point;
  explicit port_guard(port_limits limits) : limits_(limits) {}

  struct admission {
    bool admitted = false;
    std::vector<std::uint64_t> evicted; ///< connections to close now, to make room
    std::string why;                    ///< refused: why (names the cap)
  };
  /// A connection `id` accepted from `address` (without port) at `now`. Admitted ones count
  /// until `left`; the evicted ones have already left the guard.
  admission arrive(std::uint64_t id, const std::string& address, time_point now);
  /// A connection this host dialled: only its handshake deadline applies (no cap, no idle).
  void dialled(std::uint64_t id, time_point now);
  void handshaken(std::uint64_t id); ///< its handshake deadline no longer applies
  void active(std::uint64_t id, time_point now); ///< it moved bytes
  void left(std::uint64_t id);

  enum class lapse { handshake, idle };
  /// Connections past their handshake or idle deadline (in id order), each with which; they
  /// left the guard.
  std::vector<std::pair<std::uint64_t, lapse>> expired(time_point now);
  /// When `expired` has something next, if anything.
  std::optional<time_point> next_deadline() const;

  std::size_t open() const { return accepted_; } ///< accepted connections counted
  std::size_t open_from(const std::string& address) const;
  const port_limits& limits() const { return limits_; }

private:
  struct entry {
    std::string address;
    bool accepted = false;
    bool handshaken = false;
    time_point arrived;
    time_point last_active;
  };
  // The least recently active accepted connection (of `address`, if given) idle since
  // `evictable_after`, if any.
  std::optional<std::uint64_t> idlest(const std::string* address, time_point now) const;
  void erase(std::unordered_map<std::uint64_t, entry>::iterator it);

  port_limits limits_;
  std::unordered_map<std::uint64_t, entry> conns_;
  std::unordered_map<std::string, std::size_t> per_address_;
  std::size_t accepted_ = 0;
};

/// "no handshake within N ms" / "no byte in or out for N ms".
std::string describe(port_guard::lapse l, const port_limits& limits);

/// Refusals as log lines, rate-limited per source address and kind of refusal: the first in a
/// window is said, the rest are counted and the next line says how many were held back. At
/// most `max_sources` (address, kind) pairs are remembered (the stalest are forgotten first).
class refusal_log {
public:
  using time_point = std::chrono::steady_clock::time_point;
  explicit refusal_log(std::chrono::milliseconds window = std::chrono::seconds(10), std::size_t max_sources = 4096)
    : window_(window), max_sources_(max_sources) {}

  /// `line` (a refusal of `address`, "host:port" or "host", for `why`), with how many like
  /// it were held back before it; nothing while the window of that source and kind of
  /// refusal holds it back (the kind: `line` and `why`, each up to its first digit or
  /// parenthesis: "closed the connection from " + "a frame announcing ").
  std::optional<std::string> refuse(const std::string& address, const std::string& why, std::string line,
                                    time_point now);

private:
  struct source {
    time_point said;
    std::uint64_t held = 0;
  };
  std::chrono::milliseconds window_;
  std::size_t max_sources_;
  std::map<std::string, source> sources_;
};

} // namespace gwtf::actors
