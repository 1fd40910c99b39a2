// What one microbatch's compute costs on this machine: a data holder's stage (embedding, head
// and loss, forward and backward) and the heaviest relay stage (its blocks, forward and
// backward), timed on the stages the runtime trains. `caf-gwtf sim --from-config` gives each
// simulated host these times x its compute_scale. Torch-free header.
#pragma once

#include "model/model_config.hpp"

namespace gwtf::model {

/// Seconds of one microbatch's forward + backward (with the stash: no recompute), median of
/// the repetitions after a warm-up, in this thread with the process's torch settings.
struct stage_times {
  double holder_s = 0; ///< stage 0: embedding forward, head (forward + backward + loss), embedding backward
  double relay_s = 0;  ///< the heaviest relay stage: its blocks' forward and backward
  int repetitions = 0;
};

/// Times the stages of `model` with `training`'s microbatch size (and seed: the weights).
/// Requires valid configs and repetitions >= 1.
stage_times time_stages(const model_config& model, const training_config& training, int repetitions);

} // namespace gwtf::model
