// The compute of one pipeline stage, as the actors drive it: forward and backward per
// microbatch with a stash, exactly-once gradient accumulation, the optimizer step after
// replicas average, and export/import of weights and optimizer state.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include <torch/types.h>

#include "model/hash.hpp"
#include "model/model_config.hpp"
#include "model/partition.hpp"
#include "model/transformer.hpp"

namespace gwtf::model {

/// A value, or why it could not be produced.
template <class T>
using outcome = std::variant<T, std::string>;

/// Parameter-gradient sums of one replica over the microbatches it counted this iteration.
struct gradient_sum {
  std::vector<torch::Tensor> sums; ///< aligned with the stage's parameters (float32, exact: int64); empty if count = 0
  std::int64_t count = 0;          ///< microbatches counted
  std::map<std::uint32_t, std::int64_t> holders; ///< of them, per data holder index (count > 0 only)
};

/// Averages replicas, weighted by microbatch count: sum of sums / sum of counts. Exact sums
/// (int64, training.reproducible_sums: exact) add as integers and come out float32.
std::vector<torch::Tensor> average(const std::vector<gradient_sum>& replicas);

/// An optimizer step whose averaged gradient is in but whose step has not come yet
/// (training.averaging overlap: a step is taken one iteration late). It travels with the
/// state, so that a joiner or a resumed replica takes the same step as the others.
struct pending_update {
  std::int64_t iteration = 0;          ///< the iteration the gradient is of (= the stage's steps: the next step)
  double global_norm = 0;              ///< its global norm over all stages (clipping)
  std::vector<torch::Tensor> averaged; ///< aligned with the stage's parameters
};

/// Result of the exit part: the microbatch's loss and the gradient for the last relay.
struct head_result {
  double loss = 0;
  torch::Tensor grad_input;
};

/// Layer swapping (docs/model.md, "Layer swapping"): a relay stage whose state does not fit
/// `budget_bytes` keeps its blocks (weights, optimizer moments, gradient sums) in a file in
/// `dir` and streams them through a pool of resident blocks.
struct swap_options {
  std::int64_t budget_bytes = 0; ///< 0: no budget (everything in memory)
  std::string dir;               ///< where the swap file goes (empty: the working directory)
  int capacity = 1;              ///< microbatches in flight whose stashed inputs share the budget (model::plan_budget)
};

/// Bytes of state per parameter a budget is held against: fp32 weight, AdamW's two moments
/// and one gradient sum.
constexpr std::int64_t state_bytes_per_parameter = 16;

/// Stage s of the model. Stage 0 (data holders) has an entry and an exit part; relay
/// stages have blocks. Microbatches are identified by `microbatch_id::key()`.
class stage {
public:
  /// Builds stage `index` with weights initialised from training.seed (identical to the
  /// same parameters of any other partition). Requires valid configs. `rematerialize`: a
  /// forward keeps only its input and the backward recomputes it (less memory per
  /// microbatch in flight, one more forward of compute; same results). `swap`: a relay
  /// stage whose state (state_bytes_per_parameter per parameter) exceeds the budget swaps
  /// its blocks (bit-identical results, one more forward per backward); throws
  /// std::runtime_error when its swap file cannot be made.
  stage(const model_config& model, const training_config& training, int index, bool rematerialize = false,
        const swap_options& swap = {});
  ~stage();
  stage(stage&&) noexcept;
  stage& operator=(stage&&) noexcept;

  /// What this stage computes.
  const stage_span& span() const;

  /// Parameters in a fixed order (entry, blocks, exit), with their global names.
  std::vector<named_parameter> parameters() const;

  // --- relay stages 1..S-1 ---

  /// Forward of the blocks; keeps a stash until backward or drop.
  outcome<torch::Tensor> forward(std::uint64_t mb, const torch::Tensor& input);

  /// Backward of the blocks; returns the input gradient, accumulates parameter gradients.
  outcome<torch::Tensor> backward(std::uint64_t mb, const torch::Tensor& grad_output);

  /// Forward of the blocks without autograd, kept nowhere (SWARM's forward calls: servers
  /// keep nothing between calls).
  outcome<torch::Tensor> forward_only(const torch::Tensor& input) const;

  /// Backward of `mb` from its input, by any replica (SWARM's backward calls): computes the
  /// forward once with autograd, then the backward; as backward() it returns the input
  /// gradient and counts the parameter gradients once per microbatch.
  outcome<torch::Tensor> recompute_backward(std::uint64_t mb, const torch::Tensor& input,
                                            const torch::Tensor& grad_output);

  // --- stage 0 ---

  /// Entry forward: token ids [B, T] -> activations; keeps a stash.
  outcome<torch::Tensor> embed(std::uint64_t mb, const torch::Tensor& tokens);

  /// Exit: final norm, head and loss, forward and backward at once.
  outcome<head_result> head(std::uint64_t mb, const torch::Tensor& activation,
                            const torch::Tensor& targets);

  /// Entry backward: accumulates embedding gradients.
  outcome<bool> embed_backward(std::uint64_t mb, const torch::Tensor& grad_output);

  // --- bookkeeping ---

  /// Frees the stash of `mb` (it was re-routed elsewhere); true when there was one.
  bool drop(std::uint64_t mb);

  /// Microbatches with a stash.
  std::size_t stashed() const;

  /// Whether the parameter gradients of `mb` have been counted this iteration.
  bool counted(std::uint64_t mb) const;

  /// How many times the parameter gradients of `mb` were added this iteration (the most of
  /// any segment): 1 for a counted microbatch, 0 for one not counted; more is a double count.
  std::uint32_t additions(std::uint64_t mb) const;
  /// Fault injection (faults.script double_count): the next microbatch counted is added
  /// twice (by the stage's last segment), which the exactly-once check must report.
  void add_next_twice();

  /// Gradient computations discarded because their microbatch was already counted.
  std::int64_t duplicates() const;

  /// This replica's gradient sums of `iteration`. Stage 0 reports an error while some
  /// microbatch of it has passed the head but not yet the entry backward.
  outcome<gradient_sum> gradients(std::uint64_t iteration) const;
  /// The same over the microbatches of the data holders (indices) in `holders` only.
  outcome<gradient_sum> gradients(std::uint64_t iteration, const std::set<std::uint32_t>& holders) const;
  /// The sums of every iteration not yet stepped (one, unless averaging overlaps).
  outcome<gradient_sum> gradients() const;

  /// Sum of squared entries of `averaged`: this stage's part of the global norm.
  static double squared_norm(const std::vector<torch::Tensor>& averaged);

  /// Optimizer step with the replicas' averaged gradients of `iteration`, clipped by the
  /// global norm over all stages; forgets the gradient sums of `iteration` and older (a later
  /// iteration's, accumulating while this one was averaged, stay).
  outcome<bool> apply(const std::vector<torch::Tensor>& averaged, std::int64_t iteration,
                      double global_norm);

  /// Weights and optimizer state as bytes: magic, version, content hash (model::fast_hash);
  /// with `pending`, the step not taken yet (its iteration must be steps()).
  std::vector<std::uint8_t> export_state(const pending_update* pending = nullptr) const;

  /// Loads export_state() bytes of the same stage and shapes. Validates everything before
  /// changing anything: a rejected blob leaves the stage as it was. An accepted one also
  /// discards every gradient sum, counted microbatch and stashed forward; the pending step it
  /// carries, if any, goes to `pending` (reset when it carries none).
  outcome<bool> import_state(const std::uint8_t* data, std::size_t size,
                             std::optional<pending_update>* pending = nullptr);

  /// Optimizer steps taken (= iterations applied; travels in the state blob).
  std::int64_t steps() const;
  /// Content hash of the weights (replica agreement checks).
  std::uint64_t weights_hash() const;

  /// Blocks kept resident at once when the stage swaps; 0 when it does not.
  int resident_blocks() const;
  /// Bytes of this stage's state (state_bytes_per_parameter per parameter).
  std::int64_t state_bytes() const;

private:
  struct impl;
  std::unique_ptr<impl> impl_;
};


} // namespace gwtf::model
