// ATOM's rounds at one whole-model peer (docs/atom.md, "Rounds, churn and exactly once"), a
// pure core for the atom mode's compute: which local iterations make a round, whose
// parameters a round waits for, when it is complete, and whether its contributions hold each
// of their microbatches once. Peers train their own microbatches (data holder index = the
// peer's index in the roster) and take a local step per iteration; after the last iteration
// of round r (every `sync_every`, and the run's last) each sends its parameters with what it
// trained since its last average; the round is complete at a peer once its own and every
// live member's contribution are in. A crashed peer is not waited for; a joiner is a member
// from the round a serving peer named (compute_atom.cpp). A peer that crashed while sending
// reached some peers and not others: so before a round lands every peer tells the others
// whose parameters it holds, and each lands the contributors that every live contributor
// holds (agreed(): the crashed peer's parameters that reached only some are left out
// everywhere, as a crashed peer is from the next round on).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace gwtf::actors {

class atom_rounds {
public:
  /// What one peer sends for a round besides its parameters.
  struct contribution {
    std::uint64_t first_iteration = 0; ///< its iterations in the round: [first, end)
    std::uint64_t end_iteration = 0;
    std::int64_t microbatches = 0;     ///< trained in them (its weight in the average)
    std::uint64_t keys_digest = 0;     ///< key_digest of their keys, each as often as trained
  };

  /// `roster`: every peer that may ever train, in data-holder index order; `me` among them.
  atom_rounds(std::vector<std::string> roster, std::string me, int sync_every, std::uint64_t iterations,
              int microbatches_per_iteration);

  /// The round of iteration `i`, and the iterations [first, end) of round `r`.
  std::uint64_t round_of(std::uint64_t i) const;
  std::pair<std::uint64_t, std::uint64_t> iterations_of(std::uint64_t r) const;
  /// Whether iteration `i` ends its round (its step is followed by an average).
  bool ends_round(std::uint64_t i) const;

  /// `who` is live and a member from round `from` on (the founding peers: 0). Unknown names
  /// (not in the roster) are ignored.
  void member(const std::string& who, std::uint64_t from);
  /// `who` went down: no round waits for it; what it contributed stays; it takes part again
  /// only through member().
  void down(const std::string& who);

  /// A contribution of `who` (this peer's own too) to round `r`; the latest of a peer counts.
  /// A live peer with no contribution to an open round before `r` is a member from `r` on (a
  /// joiner served elsewhere whose first round is later than announced is not waited for
  /// before it). Ignored and false when `who` is not in the roster, was declared down, is a
  /// member only from a later round (it would count at some peers and not at others), or
  /// `r` was closed.
  bool contributed(const std::string& who, std::uint64_t r, const contribution& c);
  /// Whether `who` is a live member, and from which round.
  std::optional<std::uint64_t> member_from(const std::string& who) const;

  /// The live members of round `r` whose contribution is not in (this peer's own included).
  std::vector<std::string> waiting(std::uint64_t r) const;
  /// The contributors of round `r` in name order, once nothing is waited for; else nullopt.
  std::optional<std::vector<std::string>> complete(std::uint64_t r) const;
  /// Each contributor's contribution to round `r`.
  const contribution* of(std::uint64_t r, const std::string& who) const;

  /// Exactly once: empty when the contributions of `contributors` to round `r` hold each
  /// microbatch of their iterations (inside the round, every index of the iteration) once;
  /// else what is wrong, naming the peer.
  std::string check(std::uint64_t r, const std::vector<std::string>& contributors) const;

  /// `who` holds the parameters of `contributors` for round `r` (what it announced once the
  /// round was complete there). Ignored when `who` is not in the roster or `r` is not among
  /// the open rounds (at most three: the one landing, the next, one more).
  void holds(const std::string& who, std::uint64_t r, std::vector<std::string> contributors);
  /// Round `r` as every live peer lands it: `mine` (this peer's complete(r), which it
  /// announced) once each live member among them announced its own; then the contributors
  /// every one of those holds, in name order. nullopt while one is waited for.
  std::optional<std::vector<std::string>> agreed(std::uint64_t r, const std::vector<std::string>& mine) const;

  /// Round `r` landed here: it and every older round are forgotten.
  void close(std::uint64_t r);
  /// Rounds below this are closed.
  std::uint64_t open_from() const { return open_from_; }

private:
  std::vector<std::string> roster_;
  std::string me_;
  int sync_every_;
  std::uint64_t iterations_;
  int per_iteration_;
  std::map<std::string, std::uint64_t> members_; ///< live peers and the first round they are in
  std::set<std::string> down_;                    ///< declared down since they were last members
  std::map<std::uint64_t, std::map<std::string, contribution>> in_;
  std::map<std::uint64_t, std::map<std::string, std::vector<std::string>>> holds_; ///< announcements by round
  std::uint64_t open_from_ = 0;
};

} // namespace gwtf::actors
