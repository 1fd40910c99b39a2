// The Hugging Face layouts of our models (docs/checkpoints.md, Export): which of our
// parameters (model/transformer.hpp names) becomes which tensor of GPT2LMHeadModel or
// LlamaForCausalLM, and their config.json. Pure: no LibTorch.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/model_config.hpp"

namespace gwtf::deploy {

/// One tensor of the Hugging Face model, taken from one of ours.
struct hf_tensor {
  std::string name;           ///< e.g. "transformer.h.0.attn.c_attn.weight"
  std::string ours;           ///< e.g. "blocks.0.attn.qkv.weight"
  std::int64_t row_begin = 0; ///< rows [row_begin, row_begin + rows) of ours (dimension 0)
  std::int64_t rows = -1;     ///< -1: all
  bool transpose = false;     ///< GPT-2's Conv1D stores [in, out]; ours is [out, in]
  std::vector<std::int64_t> shape; ///< the Hugging Face shape
};

/// Every tensor of the Hugging Face model, in file order.
std::vector<hf_tensor> hf_layout(const model::model_config& model);

/// config.json for GPT2LMHeadModel (gpt) or LlamaForCausalLM (llama), in their keys:
/// untied head (tie_word_embeddings false), our MLP width, norm epsilon, activation and
/// RoPE base.
std::string hf_config_json(const model::model_config& model);

} // namespace gwtf::deploy
