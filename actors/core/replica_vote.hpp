// The replicas of a stage verify every step (docs/runtime.md, "Verify"), a pure core: each
// replica's weights hash after applying an iteration is compared with the hashes of the
// other replicas; the majority wins, ties go to the hash held by the lowest replica name,
// and a replica in the minority downloads the state of the majority's lowest name.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

namespace gwtf::actors {

class replica_vote {
public:
  struct verdict {
    bool diverged = false; ///< this replica is in the minority
    std::string source;    ///< lowest name holding the winning hash
  };

  /// This replica applied `iteration` and has weights hash `hash`. Forgets votes more than
  /// eight iterations older that never completed.
  void mine(std::uint64_t iteration, std::uint64_t hash);
  /// Replica `who` applied `iteration` with weights hash `hash` (its latest report counts).
  void theirs(std::uint64_t iteration, const std::string& who, std::uint64_t hash);
  /// The verdict on `iteration` once this replica's hash and at least `others` hashes of
  /// other replicas are in; the iteration (and this replica's older hashes) are then forgotten.
  std::optional<verdict> decide(std::uint64_t iteration, const std::string& me, std::size_t others);

private:
  std::map<std::uint64_t, std::map<std::string, std::uint64_t>> theirs_;
  std::map<std::uint64_t, std::uint64_t> mine_;
};

} // namespace gwtf::actors
