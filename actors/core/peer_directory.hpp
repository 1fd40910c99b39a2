// Who is in the cluster and where to dial them, for one host in node mode: a pure state
// machine (no CAF, no clock) behind the TCP link (actors/net/net_link.cpp), fed by the link-level
// GOSSIP of peers and by the transport's connection events.
//
// A connection (an opaque id the transport gives each peer connection) is bound to a host
// name by the first valid GOSSIP it sends, whose first record introduces the sender. From then
// on every frame on that connection is that peer's: a peer cannot speak for another. A peer of
// another cluster (different `cluster` hash) is never bound. Two hosts that dial each other at
// once hold two connections: the second introduction with the same incarnation and address
// binds its connection as a second one of the same peer (either carries its frames; losing
// one is not losing the peer).
//
// With TLS every connection is certified first: the transport tells the host names the peer's
// verified certificate carries (SAN URI caf-gwtf:host/NAME), and a connection is bound only to
// one of them. A peer with another host's certificate cannot take that host's name, and a
// connection the transport did not certify is never bound.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "messages/types.hpp"

namespace gwtf::actors {

/// What the directory made of a GOSSIP.
struct gossip_outcome {
  std::string error;               ///< non-empty: refused (why, naming the peer); nothing changed
  std::string peer;                ///< the sender, as introduced
  bool newly_bound = false;        ///< the connection was bound to `peer` by this gossip
  std::vector<std::string> learned; ///< names heard of for the first time (the sender included)
};

/// The cluster as one host knows it.
class peer_directory {
public:
  /// `self`: this host's introduction (name, advertised address, region, cluster hash).
  /// `bootstrap`: addresses dialled until a connected peer has them. Dial back-off doubles from
  /// `backoff_min_ms` up to `backoff_max_ms` per address. A peer (not a bootstrap address)
  /// that no dial has reached for `give_up_ms` is forgotten: it left or died, and is not
  /// dialled for ever; gossip that names it only as suspected does not bring it back, its
  /// own introduction (or a peer bound to it) does.
  peer_directory(wire::hello self, std::vector<std::string> bootstrap, std::int64_t backoff_min_ms,
                 std::int64_t backoff_max_ms, std::int64_t give_up_ms = 10 * 60 * 1000);

  /// From now on a connection is bound only to a name its certificate carries (`certified`);
  /// set when the host runs TLS.
  void require_certificates() { certificates_required_ = true; }
  /// The transport verified `conn`'s certificate, which names these hosts.
  void certified(std::uint64_t conn, std::vector<std::string> names) { certified_[conn] = std::move(names); }
  /// A GOSSIP arrived on connection `conn`.
  gossip_outcome on_gossip(std::uint64_t conn, const wire::gossip& g, std::int64_t now_ms);
  /// The name `conn` is bound to, if any.
  std::optional<std::string> bound_name(std::uint64_t conn) const;
  /// The connection bound to `peer`, if any.
  std::optional<std::uint64_t> connection(const std::string& peer) const;
  /// The transport lost `conn`; returns the peer it was bound to, if that was its last
  /// connection.
  std::optional<std::string> connection_lost(std::uint64_t conn, std::int64_t now_ms);
  /// Addresses to dial now: known peers without a connection whose back-off has passed, and
  /// the bootstrap addresses that no connected peer has. Each returned address is marked as being
  /// dialled until `dial_done`.
  std::vector<std::string> due(std::int64_t now_ms);
  /// A dial of `address` ended (`ok`: connected); a failure doubles its back-off.
  void dial_done(const std::string& address, bool ok, std::int64_t now_ms);
  /// This host's gossip: itself first, then every known peer (`suspected` when not bound).
  wire::gossip gossip() const;
  /// Names of bound peers, sorted.
  std::vector<std::string> bound() const;
  /// Names of every peer heard of, bound or not, sorted.
  std::vector<std::string> known() const;
  /// What `peer` said about itself last (region, address), if known.
  const wire::hello* record(const std::string& peer) const;
  const wire::hello& self() const { return self_; }
  /// This host restarted (a new incarnation): peers that still hold a stale connection of
  /// the old one accept the new one in its place.
  void set_incarnation(std::uint64_t incarnation) { self_.incarnation = std::max(self_.incarnation, incarnation); }

private:
  struct entry {
    wire::hello hello;
    std::optional<std::uint64_t> conn;
    std::set<std::uint64_t> more; // further connections of the same peer (simultaneous dials)
  };
  struct dial_state {
    std::int64_t not_before = 0;
    std::int64_t backoff = 0;
    bool in_flight = false;
    std::int64_t failing_since = -1; // the first failed dial since the last success; -1: none
  };
  bool dialable(const std::string& address, std::int64_t now_ms) const;
  bool given_up(const std::string& address, std::int64_t now_ms) const; // no dial reached it for give_up_ms
  void learn(const wire::gossip& g, gossip_outcome& out); // the records after the sender's
  void hint(const std::string& address);                  // dial it until a peer binds there

  wire::hello self_;
  std::vector<std::string> bootstrap_;
  std::int64_t backoff_min_, backoff_max_, give_up_;
  std::map<std::string, entry> peers_;
  std::set<std::string> forgotten_; // given up on: learned again only from itself or a bound record
  std::map<std::uint64_t, std::string> by_conn_;
  bool certificates_required_ = false;
  std::map<std::uint64_t, std::vector<std::string>> certified_; // conn -> its certificate's host names
  std::map<std::string, dial_state> dials_;
  /// Addresses claimed on another peer's connection: dialled until a peer binds there, so
  /// that a true claim is heard over the claimant's own connection.
  std::set<std::string> hinted_;
};

} // namespace gwtf::actors
