// One of ATOM's whole-model peers (docs/atom.md): every stage of the model in one process
// (stage 0's embedding and head, every relay stage's blocks, a relay stage over a memory
// budget swapping its blocks), trained on its own microbatches with its own AdamW step per
// iteration (a local step), and the peers' parameter average folded in when it comes. The
// training semantics of model::run_atom_reference, against which it is tested.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include <torch/types.h>

#include "model/data.hpp"
#include "model/pipeline.hpp"

namespace gwtf::model {

class atom_peer {
public:
  /// Weights from training.seed (every peer starts alike); `relays`: the relay stages'
  /// layer swapping.
  atom_peer(const model_config& model, const training_config& training, const swap_options& relays = {});

  /// Forward and backward of one microbatch through the whole model; its gradients are
  /// added once per key. Returns its loss.
  outcome<double> train(std::uint64_t mb, const microbatch_tokens& tokens);

  /// The local step of `iteration`: the mean gradient of this peer's microbatches since the
  /// last step, clipped by its global norm, one AdamW step; returns the norm.
  outcome<double> step(std::int64_t iteration);

  /// The parameters as one flat fp32 vector in stage order (entry, blocks, exit): what this
  /// peer contributes to an average.
  torch::Tensor contribution() const;

  /// Folds the average of a round in: every parameter becomes `average` plus what this
  /// peer's local steps changed since it sent `contributed` (with no step since, exactly
  /// `average`). Both must have this peer's shape; the moments stay this peer's.
  outcome<bool> land(const torch::Tensor& average, const torch::Tensor& contributed);

  /// Every stage's state (weights, optimizer moments, steps: stage::export_state), each
  /// prefixed by its size: what a joiner takes its moments from.
  std::vector<std::uint8_t> export_state() const;
  /// Loads export_state() bytes of a peer of the same model; validates every stage before
  /// changing anything (a rejected blob leaves this peer as it was).
  outcome<bool> import_state(const std::uint8_t* data, std::size_t size);

  /// Parameters in all.
  std::int64_t parameter_count() const;
  /// Content hash of the weights (peers that averaged alike agree).
  std::uint64_t weights_hash() const;
  /// Blocks resident at once over the swapped relay stages (0: nothing swapped).
  int resident_blocks() const;

private:
  std::vector<torch::Tensor> tensors() const;
  local_pipeline pipeline_;
};

/// The peers' average, weighted by the microbatches each trained on since the last one:
/// `contributions` as (microbatches, flat parameters), summed in the order given (callers
/// give name order, so every peer computes the same bits). An error for none, for a count
/// below 1, or for shapes that differ.
outcome<torch::Tensor> average_parameters(const std::vector<std::pair<std::int64_t, torch::Tensor>>& contributions);

} // namespace gwtf::model
