// The end of an iteration as one replica sees it (docs/runtime.md), a pure state machine:
// 1. every live data holder reported ITERATION_DONE -> this replica shares its gradient sum;
// 2. shares from every live replica of the stage are in -> average (in replica-name order,
//    so all replicas compute bit-identical results) and share the stage's squared norm;
// 3. a norm from every stage is in -> clip by the global norm and step.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "messages/types.hpp"

namespace gwtf::actors {

class iteration_barrier {
public:
  /// `stages`: pipeline stages of the model (stage 0 = data holders).
  explicit iteration_barrier(int stages);
  /// A data holder finished `d.iteration`.
  void holder_done(const wire::iteration_done& d);
  /// Every holder in `live_holders` reported `iteration` (and at least one did).
  bool holders_done(std::uint64_t iteration, const std::vector<std::string>& live_holders) const;
  /// Reports of `iteration`, by holder.
  std::map<std::string, wire::iteration_done> reports(std::uint64_t iteration) const;
  /// A replica's share of `iteration` arrived (its payload is kept by the caller).
  void share(std::uint64_t iteration, const std::string& replica);
  /// Shares of `iteration` from `self` and every replica in `live_replicas` are in.
  bool shares_complete(std::uint64_t iteration, const std::string& self,
                       const std::vector<std::string>& live_replicas) const;
  /// A stage's squared norm of `iteration`; the first per stage counts.
  void norm(std::uint64_t iteration, std::uint32_t stage, double sum_squares);
  /// sqrt of the sum over stages once every stage reported.
  std::optional<double> global_norm(std::uint64_t iteration) const;
  /// Forgets `iteration` and older.
  void finish(std::uint64_t iteration);

private:
  int stages_;
  std::map<std::uint64_t, std::map<std::string, wire::iteration_done>> done_;
  std::map<std::uint64_t, std::set<std::string>> shares_;
  std::map<std::uint64_t, std::map<std::uint32_t, double>> norms_;
};

} // namespace gwtf::actors
