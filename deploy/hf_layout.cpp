#include "deploy/hf_layout.hpp"

#include <nlohmann/json.hpp>

namespace gwtf::deploy {

std::vector<hf_tensor> hf_layout(const model::model_config& m) {
  std::int64_t d = m.hidden, f = m.resolved_ffn_hidden(), v = m.vocab, t = m.seq_len;
  std::vector<hf_tensor> out;
  auto add = [&](std::string name, std::string ours, std::vector<std::int64_t> shape, bool transpose = false,
                 std::int64_t row_begin = 0, std::int64_t rows = -1) {
    out.push_back({std::move(name), std::move(ours), row_begin, rows, transpose, std::move(shape)});
  };
  if (m.arch == model::architecture::gpt) {
    add("transformer.wte.weight", "embed.wte", {v, d});
    add("transformer.wpe.weight", "embed.wpe", {t, d});
    for (int l = 0; l < m.layers; ++l) {
      auto hf = "transformer.h." + std::to_string(l) + ".";
      auto b = "blocks." + std::to_string(l) + ".";
      add(hf + "ln_1.weight", b + "norm1.weight", {d});
      add(hf + "ln_1.bias", b + "norm1.bias", {d});
      // Conv1D: y = x W + b with W [in, out]; q, k, v side by side in out, heads within
      // each, as in our qkv rows.
      add(hf + "attn.c_attn.weight", b + "attn.qkv.weight", {d, 3 * d}, true);
      add(hf + "attn.c_attn.bias", b + "attn.qkv.bias", {3 * d});
      add(hf + "attn.c_proj.weight", b + "attn.proj.weight", {d, d}, true);
      add(hf + "attn.c_proj.bias", b + "attn.proj.bias", {d});
      add(hf + "ln_2.weight", b + "norm2.weight", {d});
      add(hf + "ln_2.bias", b + "norm2.bias", {d});
      add(hf + "mlp.c_fc.weight", b + "mlp.fc.weight", {d, f}, true);
      add(hf + "mlp.c_fc.bias", b + "mlp.fc.bias", {f});
      add(hf + "mlp.c_proj.weight", b + "mlp.proj.weight", {f, d}, true);
      add(hf + "mlp.c_proj.bias", b + "mlp.proj.bias", {d});
    }
    add("transformer.ln_f.weight", "head.norm.weight", {d});
    add("transformer.ln_f.bias", "head.norm.bias", {d});
    add("lm_head.weight", "head.lm_head.weight", {v, d});
    return out;
  }
  add("model.embed_tokens.weight", "embed.wte", {v, d});
  for (int l = 0; l < m.layers; ++l) {
    auto hf = "model.layers." + std::to_string(l) + ".";
    auto b = "blocks." + std::to_string(l) + ".";
    add(hf + "input_layernorm.weight", b + "norm1.weight", {d});
    // nn.Linear stores [out, in] as we do; q, k, v are our qkv's row blocks.
    add(hf + "self_attn.q_proj.weight", b + "attn.qkv.weight", {d, d}, false, 0, d);
    add(hf + "self_attn.k_proj.weight", b + "attn.qkv.weight", {d, d}, false, d, d);
    add(hf + "self_attn.v_proj.weight", b + "attn.qkv.weight", {d, d}, false, 2 * d, d);
    add(hf + "self_attn.o_proj.weight", b + "attn.proj.weight", {d, d});
    add(hf + "post_attention_layernorm.weight", b + "norm2.weight", {d});
    add(hf + "mlp.gate_proj.weight", b + "mlp.w1.weight", {f, d});
    add(hf + "mlp.up_proj.weight", b + "mlp.w3.weight", {f, d});
    add(hf + "mlp.down_proj.weight", b + "mlp.proj.weight", {d, f});
  }
  add("model.norm.weight", "head.norm.weight", {d});
  add("lm_head.weight", "head.lm_head.weight", {v, d});
  return out;
}

std::string hf_config_json(const model::model_config& m) {
  nlohmann::ordered_json j;
  if (m.arch == model::architecture::gpt) {
    j["architectures"] = {"GPT2LMHeadModel"};
    j["model_type"] = "gpt2";
    j["vocab_size"] = m.vocab;
    j["n_positions"] = m.seq_len;
    j["n_embd"] = m.hidden;
    j["n_layer"] = m.layers;
    j["n_head"] = m.heads;
    j["n_inner"] = m.resolved_ffn_hidden();
    j["activation_function"] = "gelu"; // exact (erf) GELU, as torch::gelu; not GPT-2's gelu_new
    j["layer_norm_epsilon"] = 1e-5;
    j["resid_pdrop"] = 0.0;
    j["embd_pdrop"] = 0.0;
    j["attn_pdrop"] = 0.0;
    j["scale_attn_weights"] = true;
    j["tie_word_embeddings"] = false; // our head has its own weights
    j["bos_token_id"] = 0;
    j["eos_token_id"] = 0;
  } else {
    j["architectures"] = {"LlamaForCausalLM"};
    j["model_type"] = "llama";
    j["vocab_size"] = m.vocab;
    j["max_position_embeddings"] = m.seq_len;
    j["hidden_size"] = m.hidden;
    j["intermediate_size"] = m.resolved_ffn_hidden();
    j["num_hidden_layers"] = m.layers;
    j["num_attention_heads"] = m.heads;
    j["num_key_value_heads"] = m.heads;
    j["hidden_act"] = "silu";
    j["rms_norm_eps"] = 1e-5;
    j["rope_theta"] = 10000.0; // half-split rotation (rotate_half), as Hugging Face's
    j["attention_bias"] = false;
    j["mlp_bias"] = false;
    j["tie_word_embeddings"] = false;
    j["bos_token_id"] = 0;
    j["eos_token_id"] = 0;
  }
  j["torch_dtype"] = "float32";
  j["caf_gwtf"] = {{"layers", m.layers}, {"stages", m.stages}, {"arch", m.arch == model::architecture::gpt ? "gpt" : "llama"},
                   {"note", "vocabulary: byte-level ids 0..vocab-1 (the text format reads bytes); no tokenizer files"}};
  return j.dump(2) + "\n";
}

} // namespace gwtf::deploy
