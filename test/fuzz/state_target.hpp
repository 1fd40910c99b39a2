// The stage whose state blobs the state fuzzer feeds; the seed corpus is exported from the
// same stage, so the seeds reach past the shape checks.
#pragma once

#include "model/stage.hpp"

namespace gwtf::test {

/// Stage 1 of a tiny 3-stage model (2 blocks, width 8).
inline model::stage fuzz_state_stage() {
  model::model_config m;
  m.layers = 2;
  m.hidden = 8;
  m.heads = 2;
  m.seq_len = 4;
  m.vocab = 16;
  m.stages = 3;
  return model::stage{m, model::training_config{}, 1};
}

} // namespace gwtf::test
