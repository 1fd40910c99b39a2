// Split of the model into pipeline stages: a pure function of the config.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/model_config.hpp"

namespace gwtf::model {

/// What one pipeline stage computes.
struct stage_span {
  int stage = 0;        ///< 0 = data holder, 1..S-1 = relay stages
  int first_layer = 0;  ///< first transformer block (inclusive)
  int end_layer = 0;    ///< one past the last block; equal to first_layer when none
  bool entry = false;   ///< holds the embedding (token + positions)
  bool exit = false;    ///< holds the final norm, the LM head and the loss

  /// Number of transformer blocks in this stage.
  int blocks() const { return end_layer - first_layer; }
};

/// Partitions `cfg.layers` blocks over relay stages 1..S-1, as evenly as possible (all
/// blocks cost the same); stage 0 gets the embedding and the head. Requires a valid cfg.
std::vector<stage_span> partition(const model_config& cfg);

/// Human-readable one-line description, e.g. "stage 2: blocks 2-3".
std::string describe(const stage_span& span);

/// Bytes of one activation (or its gradient) between stages: fp32 [batch, seq, hidden].
std::int64_t activation_bytes(const model_config& cfg, int microbatch_size);

} // namespace gwtf::model
