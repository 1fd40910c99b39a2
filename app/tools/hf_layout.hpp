// The Hugging Face layouts of our models (docs/checkpoints.md, Export): which of our
// parameters (model/transformer.hpp names) becomes which tensor of GPT2LMHeadModel or
// LlamaForCausalLM, and their config.json. Pure: no LibTorch.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <variant>
#include <vector>

#include "model/model_config.hpp"

namespace gwtf::app {

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

/// One tensor's entry in a safetensors header.
struct safetensors_entry {
  std::string dtype;                 ///< F32, F16 or BF16 (others are refused)
  std::vector<std::int64_t> shape;
  std::uint64_t begin = 0, end = 0;  ///< byte range within the data section
};

/// A parsed safetensors header: tensors by name and where the data section starts.
struct safetensors_index {
  std::map<std::string, safetensors_entry> tensors;
  std::uint64_t data_offset = 0; ///< 8 + header size
};

/// Parses and checks a whole safetensors file's header against its size: every byte is
/// untrusted (sizes, JSON, dtypes, shapes, ranges inside the data and not overlapping).
std::variant<safetensors_index, std::string> parse_safetensors(const std::uint8_t* data, std::size_t size);

/// config.json of a Hugging Face model against ours: one line per key that differs in a way
/// that changes the computation (errors), and notes for differences we can take (e.g.
/// gelu_new for gelu, a longer position table).
struct hf_config_check {
  std::vector<std::string> errors, notes;
  bool tied = false; ///< tie_word_embeddings: the head is the embedding
};
hf_config_check check_hf_config(const model::model_config& model, const std::string& config_json);

/// config.json for GPT2LMHeadModel (gpt) or LlamaForCausalLM (llama), in their keys:
/// untied head (tie_word_embeddings false), our MLP width, norm epsilon, activation and
/// RoPE base.
std::string hf_config_json(const model::model_config& model);

} // namespace gwtf::app
