// The unpartitioned model trained in one process: the correctness oracle of every
// distributed run and the compute-speed limit it is measured against.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "model/data.hpp"
#include "model/share_codec.hpp"
#include "model/stage.hpp"

namespace gwtf::model {

/// The whole model with the same parameters, initialisation and optimizer as the stages.
class reference_model {
public:
  reference_model(const model_config& model, const training_config& training);
  ~reference_model();

  /// Parameters in stage order: entry, blocks 0..L-1, exit.
  std::vector<named_parameter> parameters() const;

  /// Forward and backward of one microbatch; accumulates its gradients (once per key).
  double accumulate(std::uint64_t mb, const microbatch_tokens& tokens);

  /// Gradient sums since the last apply.
  gradient_sum gradients() const;

  /// Averages, clips by the global norm and takes one AdamW step; returns the norm.
  double apply(std::int64_t iteration);

  /// The average of the gradient sums since the last apply or take, and its global norm;
  /// the sums start again (the next iteration accumulates apart). apply = take + step.
  std::pair<std::vector<torch::Tensor>, double> take_average();
  /// One AdamW step with `averaged` (clipped by its global `norm`) at `iteration`'s rate.
  void step(const std::vector<torch::Tensor>& averaged, double norm, std::int64_t iteration);

private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

/// One line of the reference trainer's progress.
struct reference_report {
  std::int64_t iteration = 0;
  double loss = 0;          ///< mean over the iteration's microbatches
  double lr = 0;            ///< learning rate used
  double grad_norm = 0;     ///< global gradient norm before clipping
  double tokens_per_s = 0;  ///< training tokens of this iteration / its wall time
};

/// Trains `training.iterations` steps. Each iteration takes microbatches_per_holder
/// microbatches from each of `holders` data holders, in holder order, exactly as the
/// distributed run samples them. Returns an error for an unusable corpus.
/// `averaging`: sync steps with each iteration's gradient before the next one; overlap (as
/// hivemind's delayed optimizer step, model/share_codec.hpp) computes iteration t on the
/// weights before t-1's step, which it takes after t's gradients: every step one iteration
/// stale, the last one taken after the last iteration. A report's grad_norm is of its own
/// iteration's gradient either way.
outcome<bool> run_reference(const model_config& model, const training_config& training,
                            const data_config& data, int holders,
                            const std::function<void(const reference_report&)>& on_iteration,
                            averaging_mode averaging = averaging_mode::sync);

/// ATOM's training semantics in one process (docs/atom.md): `peers` whole-model peers, peer p
/// training on data holder p's microbatches (the same samples the pipeline's holder p
/// takes), each with its own AdamW step per iteration (a local step), and every `sync_every`
/// iterations (and after the last) the peers' parameters replaced by their mean (the
/// optimizer moments stay each peer's own, as ATOM's). A report's loss is the mean over every
/// peer's microbatches of the iteration (the same tokens as run_reference's iteration with
/// holders = peers) and its grad_norm the peers' mean. One peer is run_reference.
outcome<bool> run_atom_reference(const model_config& model, const training_config& training,
                                 const data_config& data, int peers, int sync_every,
                                 const std::function<void(const reference_report&)>& on_iteration);

} // namespace gwtf::model
