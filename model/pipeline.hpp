// Every stage of the model in one process, driven through the stage API in order: the
// sequential pipeline that the parity tests compare with the reference, and the baseline
// for the stage API's overhead.
#pragma once

#include <cstdint>
#include <vector>

#include "model/data.hpp"
#include "model/stage.hpp"

namespace gwtf::model {

/// Stages 0..S-1 with one replica each.
class local_pipeline {
public:
  /// `relays`: the relay stages' layer swapping (stage 0 ignores a budget).
  local_pipeline(const model_config& model, const training_config& training, const swap_options& relays = {});

  /// Stages 0..S-1.
  int stages() const { return static_cast<int>(stages_.size()); }

  /// Stage s.
  stage& at(int s) { return stages_.at(static_cast<std::size_t>(s)); }
  const stage& at(int s) const { return stages_.at(static_cast<std::size_t>(s)); }

  /// Forward 0 -> 1 -> ... -> S-1 -> head, then backward back to the embedding.
  outcome<double> run_microbatch(std::uint64_t mb, const microbatch_tokens& tokens);

  /// Averages every stage's gradients, clips by their global norm, steps; returns the norm.
  outcome<double> apply(std::int64_t iteration);

private:
  std::vector<stage> stages_;
};

} // namespace gwtf::model
