// Sizes of the model and of its pipeline stages, exact for the modules model/transformer.cpp
// builds: parameter counts, the FLOPs of a training step per token, the bytes of an
// activation. Torch-free and pure: the runtime's --check report and the simulator's
// scenarios (app/sim/scenario.cpp) size hosts with these, and test/model checks the
// parameter counts against what the torch modules really allocate.
#pragma once

#include <cstdint>

#include "model/model_config.hpp"
#include "model/partition.hpp"

namespace gwtf::model {

/// One transformer block: attention (qkv, projection), MLP, two norms; GPT adds biases.
std::int64_t block_parameters(const model_config& cfg);
/// The entry part: token embedding (+ learned positions for GPT).
std::int64_t entry_parameters(const model_config& cfg);
/// The exit part: final norm and LM head (untied from the embedding).
std::int64_t exit_parameters(const model_config& cfg);
/// The whole model.
std::int64_t model_parameters(const model_config& cfg);

/// What one stage holds and computes.
struct stage_size {
  std::int64_t parameters = 0;
  /// Forward FLOPs per token as the kernels run them: 2 per multiply-add of every matrix
  /// product (linear layers; attention scores and their mix over the whole seq_len, the
  /// causal mask applied after the product), nothing for lookups, norms and activations.
  double forward_flops_per_token = 0;
  /// Forward + backward (the backward computes input and weight gradients: twice the
  /// forward's products).
  double training_flops_per_token() const { return 3 * forward_flops_per_token; }
};

/// The size of `span` (one element of partition(cfg)). Requires a valid cfg.
stage_size size_of(const model_config& cfg, const stage_span& span);

/// The relay stage with the most blocks (the pipeline's heaviest; the first on ties).
stage_span heaviest_relay_stage(const model_config& cfg);

/// One relay stage's gradients as its replicas average them: the heaviest relay stage's
/// parameters x `bytes_per_value` (the trainer sends fp32: 4); 0 without relay stages. DT-FM's
/// placement (app/config/derive.cpp) and the simulator (sim/scenario.cpp) size it with this.
double relay_gradient_bytes(const model_config& cfg, double bytes_per_value);

/// What one host of a stage needs in memory while training, in bytes (fp32 everywhere), an
/// estimate for `--check`: weights; Adam's two moments; the parameters' gradients plus the
/// gradient sums a replica keeps as training.reproducible_sums says (off: one per data holder
/// whose microbatches it counts, a data holder its own only; key_order: one per microbatch it
/// counts, at most every microbatch of those holders; exact: one int64 sum per holder, twice
/// fp32's bytes); the shares it averages (its own
/// flattened sum and one per other replica; exact: int64); and the activations of the microbatches it holds at
/// once. Activations per block and microbatch follow Korthikanti et al. (2022), doubled for
/// fp32: b s h (68 + 10 a s / h) bytes; a relay that rematerialises keeps only each
/// microbatch's input plus one microbatch's blocks; a data holder keeps the embedding output
/// per microbatch plus one microbatch's logits, their softmax and its gradient (3 b s V x 4).
struct memory_estimate {
  double weights = 0, optimizer = 0, gradients = 0, shares = 0, activations = 0;
  double total() const { return weights + optimizer + gradients + shares + activations; }
};

/// `span`'s host with `capacity` microbatches in flight, among `replicas` hosts of its stage
/// and `holders` data holders of `microbatches_per_holder` each; `rematerialize`: relays keep
/// only their inputs.
memory_estimate estimate_memory(const model_config& cfg, const stage_span& span, int microbatch_size, int capacity,
                                int replicas, int holders, bool rematerialize, sum_order sums = sum_order::off,
                                int microbatches_per_holder = 1);

/// What a relay host under a memory budget keeps and holds at once (docs/model.md, "Layer
/// swapping"): the one rule the stage, the runtime's capacity, placement and `--check` use.
struct budget_plan {
  bool swapped = false; ///< the stage's state (16 B a parameter) exceeds the budget: its blocks live in a file
  int pool = 0;         ///< swapped: blocks resident at once (at least one)
  int capacity = 0;     ///< microbatches in flight the budget leaves room for (1..the host's capacity)
};

/// The plan for `span`'s host with `capacity` microbatches in flight and `budget_bytes` (0:
/// none). Swapped, the stashed inputs (each block's, per microbatch in flight) and the pool
/// share the budget: the capacity drops until the stash leaves room for one block, the pool
/// takes what the stash leaves. In memory, the capacity drops until the state plus the
/// activations in flight (`rematerialize`: each microbatch's input; else every block's
/// activations) fit, never below one. Stage 0 and a host without a budget keep `capacity`.
budget_plan plan_budget(const model_config& cfg, const stage_span& span, int microbatch_size, int capacity,
                    double budget_bytes, bool rematerialize);

} // namespace gwtf::model
