// The decoder-only models in LibTorch: GPT (learned positions, LayerNorm, GELU) and LLaMA
// (RoPE, RMSNorm, SwiGLU, no biases), as three kinds of parts: the entry (embedding), the
// blocks, and the exit (final norm, LM head). A pipeline stage owns some parts; the
// unpartitioned model owns all. Parameters carry global names and are initialised from
// (seed, name), so every partition of the same config starts from identical weights.
//
// LibTorch header: include it only from model/ sources.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <torch/types.h>

#include "model/model_config.hpp"

namespace gwtf::model {

/// A parameter and its name in the whole model, e.g. "blocks.3.attn.qkv.weight".
struct named_parameter {
  std::string name;
  torch::Tensor tensor;
};

/// Embedding: token ids [B, T] (int64) -> activations [B, T, d].
class entry_part {
public:
  explicit entry_part(const model_config& cfg);
  torch::Tensor forward(const torch::Tensor& tokens) const;
  const std::vector<named_parameter>& parameters() const { return params_; }

private:
  architecture arch_;
  std::vector<named_parameter> params_; // wte, then wpe (GPT)
};

/// One transformer block: [B, T, d] -> [B, T, d].
class block_part {
public:
  block_part(const model_config& cfg, int layer);
  torch::Tensor forward(const torch::Tensor& x) const;
  const std::vector<named_parameter>& parameters() const { return params_; }

private:
  torch::Tensor param(const std::string& short_name) const;
  torch::Tensor norm(const torch::Tensor& x, const char* which) const;

  architecture arch_;
  int heads_;
  std::string prefix_;
  std::vector<named_parameter> params_;
  torch::Tensor rope_cos_, rope_sin_; // llama: [T, head_dim]
  torch::Tensor causal_mask_;         // [T, T], true above the diagonal
};

/// Final norm + LM head: activations [B, T, d] -> logits [B, T, V].
class exit_part {
public:
  explicit exit_part(const model_config& cfg);
  torch::Tensor forward(const torch::Tensor& x) const;
  const std::vector<named_parameter>& parameters() const { return params_; }

private:
  architecture arch_;
  std::vector<named_parameter> params_; // norm weight, (norm bias), head weight
};

/// Mean cross-entropy of logits [B, T, V] against targets [B, T].
torch::Tensor lm_loss(const torch::Tensor& logits, const torch::Tensor& targets);

/// Initialises every parameter from (seed, its global name): same name, same values,
/// whatever part or process holds it. GPT-2 scheme: N(0, 0.02), residual projections
/// N(0, 0.02/sqrt(2L)), biases 0, norm weights 1.
void init_parameters(const std::vector<named_parameter>& params, std::uint64_t seed, int layers);

/// Converts sampled token rows into (inputs [B, T], targets [B, T]) int64 tensors.
std::pair<torch::Tensor, torch::Tensor> to_inputs_targets(int rows, int cols,
                                                          const std::vector<std::int32_t>& tokens);

} // namespace gwtf::model
