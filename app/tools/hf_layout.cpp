#include "app/tools/hf_layout.hpp"

#include <algorithm>

#include <nlohmann/json.hpp>

namespace gwtf::app {

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

std::variant<safetensors_index, std::string> parse_safetensors(const std::uint8_t* data, std::size_t size) {
  if (data == nullptr || size < 8)
    return std::to_string(size) + " bytes: shorter than a safetensors header size";
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i)
    n = n << 8 | data[i];
  if (n > size - 8 || n > (100u << 20))
    return "header of " + std::to_string(n) + " bytes in a file of " + std::to_string(size);
  auto j = nlohmann::json::parse(data + 8, data + 8 + n, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    return std::string{"header is not a JSON object"};
  safetensors_index out;
  out.data_offset = 8 + n;
  std::uint64_t data_size = size - 8 - n;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> ranges;
  for (auto& [name, e] : j.items()) {
    if (name == "__metadata__")
      continue;
    auto where = "tensor '" + name.substr(0, 200) + "': ";
    if (!e.is_object() || !e.contains("dtype") || !e.contains("shape") || !e.contains("data_offsets"))
      return where + "expected dtype, shape and data_offsets";
    if (!e["dtype"].is_string())
      return where + "dtype is not a string";
    safetensors_entry t;
    t.dtype = e["dtype"].get<std::string>();
    std::uint64_t width = t.dtype == "F32" ? 4 : (t.dtype == "F16" || t.dtype == "BF16") ? 2 : 0;
    if (width == 0)
      return where + "dtype " + t.dtype.substr(0, 20) + " (F32, F16 or BF16 are read)";
    auto& shape = e["shape"];
    if (!shape.is_array() || shape.size() > 8)
      return where + "shape is not a list of at most 8 sizes";
    std::uint64_t count = 1;
    for (auto& d : shape) {
      if (!d.is_number_unsigned() || d.get<std::uint64_t>() > (std::uint64_t{1} << 40))
        return where + "shape holds something other than a size";
      auto v = d.get<std::uint64_t>();
      if (v != 0 && count > (std::uint64_t{1} << 62) / v)
        return where + "shape overflows";
      count *= v;
      t.shape.push_back(static_cast<std::int64_t>(v));
    }
    auto& off = e["data_offsets"];
    if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() || !off[1].is_number_unsigned())
      return where + "data_offsets is not [begin, end]";
    t.begin = off[0].get<std::uint64_t>();
    t.end = off[1].get<std::uint64_t>();
    if (t.begin > t.end || t.end > data_size)
      return where + "data_offsets [" + std::to_string(t.begin) + ", " + std::to_string(t.end)
             + "] outside the data section of " + std::to_string(data_size) + " bytes";
    if (t.end - t.begin != count * width)
      return where + std::to_string(t.end - t.begin) + " bytes for " + std::to_string(count) + " " + t.dtype
             + " values";
    ranges.emplace_back(t.begin, t.end);
    out.tensors.emplace(name, std::move(t));
  }
  std::sort(ranges.begin(), ranges.end());
  for (std::size_t i = 1; i < ranges.size(); ++i)
    if (ranges[i].first < ranges[i - 1].second)
      return std::string{"two tensors share bytes of the data section"};
  return out;
}

hf_config_check check_hf_config(const model::model_config& m, const std::string& text) {
  hf_config_check out;
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    out.errors.push_back("config.json is not a JSON object");
    return out;
  }
  bool gpt = m.arch == model::architecture::gpt;
  auto number = [&](std::initializer_list<const char*> keys, long long fallback) -> long long {
    for (auto* k : keys)
      if (j.contains(k) && j[k].is_number_integer())
        return j[k].get<long long>();
    return fallback;
  };
  auto expect = [&](const char* key, long long got, long long want, const char* ours) {
    if (got != want)
      out.errors.push_back(std::string{key} + " is " + std::to_string(got) + ", our " + ours + " is "
                           + std::to_string(want));
  };
  auto type = j.value("model_type", std::string{});
  if (type != (gpt ? "gpt2" : "llama")) {
    out.errors.push_back("model_type is '" + type.substr(0, 40) + "', model.arch " + (gpt ? "gpt" : "llama")
                         + " reads '" + (gpt ? "gpt2" : "llama") + "'");
    return out;
  }
  out.tied = j.value("tie_word_embeddings", true);
  if (out.tied)
    out.notes.push_back("tie_word_embeddings: the embedding is copied into caf-gwtf's separate head (they train apart "
                        "from then on)");
  if (gpt) {
    expect("vocab_size", number({"vocab_size"}, -1), m.vocab, "model.vocab");
    expect("n_embd", number({"n_embd"}, -1), m.hidden, "model.hidden");
    expect("n_layer", number({"n_layer"}, -1), m.layers, "model.layers");
    expect("n_head", number({"n_head"}, -1), m.heads, "model.heads");
    auto inner = j.contains("n_inner") && j["n_inner"].is_number_integer() ? j["n_inner"].get<long long>()
                                                                             : 4ll * number({"n_embd"}, 0);
    expect("n_inner", inner, m.resolved_ffn_hidden(), "MLP width (model.ffn_hidden)");
    auto positions = number({"n_positions"}, -1);
    if (positions < m.seq_len)
      out.errors.push_back("n_positions is " + std::to_string(positions) + ", fewer than model.seq_len "
                           + std::to_string(m.seq_len));
    else if (positions > m.seq_len)
      out.notes.push_back("n_positions " + std::to_string(positions) + ": the first " + std::to_string(m.seq_len)
                          + " position embeddings are used (model.seq_len)");
    auto act = j.value("activation_function", std::string{"gelu_new"});
    if (act == "gelu_new" || act == "gelu_pytorch_tanh")
      out.notes.push_back("activation_function " + act + ": trained with the tanh GELU; caf-gwtf computes the exact "
                          "GELU (they differ by under 1e-3 per activation)");
    else if (act != "gelu")
      out.errors.push_back("activation_function is '" + act.substr(0, 40) + "', caf-gwtf computes gelu");
  } else {
    expect("vocab_size", number({"vocab_size"}, -1), m.vocab, "model.vocab");
    expect("hidden_size", number({"hidden_size"}, -1), m.hidden, "model.hidden");
    expect("num_hidden_layers", number({"num_hidden_layers"}, -1), m.layers, "model.layers");
    expect("num_attention_heads", number({"num_attention_heads"}, -1), m.heads, "model.heads");
    expect("num_key_value_heads", number({"num_key_value_heads", "num_attention_heads"}, -1), m.heads,
           "model.heads (no grouped-query attention)");
    expect("intermediate_size", number({"intermediate_size"}, -1), m.resolved_ffn_hidden(),
           "MLP width (model.ffn_hidden)");
    if (j.contains("rope_theta") && j["rope_theta"].is_number() && j["rope_theta"].get<double>() != 10000.0)
      out.errors.push_back("rope_theta is " + std::to_string(j["rope_theta"].get<double>()) + ", caf-gwtf uses 10000");
    if (j.contains("rope_scaling") && !j["rope_scaling"].is_null())
      out.errors.push_back("rope_scaling is set; caf-gwtf has no RoPE scaling");
    if (j.value("attention_bias", false) || j.value("mlp_bias", false))
      out.errors.push_back("attention_bias / mlp_bias: caf-gwtf's LLaMA has no biases");
  }
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

} // namespace gwtf::app
