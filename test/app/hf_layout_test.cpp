// The Hugging Face layouts (app/tools/hf_layout): names and shapes, config.json checks, and the
// safetensors header parser against hostile files.
#include <doctest/doctest.h>

#include <cstring>
#include <set>
#include <string>

#include "app/tools/hf_layout.hpp"

using namespace gwtf;
using namespace gwtf::app;

namespace {

model::model_config small(model::architecture arch) {
  model::model_config m;
  m.arch = arch;
  m.layers = 2;
  m.hidden = 64;
  m.heads = 4;
  m.seq_len = 32;
  m.vocab = 256;
  m.stages = 3;
  return m;
}

std::string file(const std::string& header, std::size_t data_bytes) {
  std::string out(8, '\0');
  std::uint64_t n = header.size();
  std::memcpy(out.data(), &n, 8);
  return out + header + std::string(data_bytes, '\0');
}

std::string parse_error(const std::string& bytes) {
  auto r = parse_safetensors(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
  return std::holds_alternative<std::string>(r) ? std::get<std::string>(r) : std::string{};
}

bool has(const std::string& text, const std::string& what) { return text.find(what) != std::string::npos; }

} // namespace

TEST_CASE("hf layout: every parameter of ours is covered once, with the Hugging Face shapes") {
  for (auto arch : {model::architecture::gpt, model::architecture::llama}) {
    auto m = small(arch);
    auto layout = hf_layout(m);
    std::set<std::string> names;
    std::int64_t qkv_rows = 0;
    for (auto& t : layout) {
      CHECK_MESSAGE(names.insert(t.name).second, t.name << " twice");
      if (t.ours == "blocks.1.attn.qkv.weight")
        qkv_rows += t.rows < 0 ? 3 * m.hidden : t.rows;
    }
    CHECK(qkv_rows == 3 * m.hidden); // q, k and v all taken, none twice
    CHECK(names.count("lm_head.weight") == 1);
    if (arch == model::architecture::gpt) {
      CHECK(layout.size() == 3 + 12 * 2 + 2);
      auto c_attn = std::find_if(layout.begin(), layout.end(), [](auto& t) { return t.name == "transformer.h.0.attn.c_attn.weight"; });
      REQUIRE(c_attn != layout.end());
      CHECK(c_attn->transpose);
      CHECK(c_attn->shape == std::vector<std::int64_t>{64, 192});
    } else {
      CHECK(layout.size() == 1 + 9 * 2 + 2);
      auto k = std::find_if(layout.begin(), layout.end(), [](auto& t) { return t.name == "model.layers.1.self_attn.k_proj.weight"; });
      REQUIRE(k != layout.end());
      CHECK(k->row_begin == 64);
      CHECK(k->rows == 64);
      CHECK_FALSE(k->transpose);
    }
  }
}

TEST_CASE("hf config: our export is accepted, other shapes are errors naming the key, tanh GELU a note") {
  auto gpt = small(model::architecture::gpt);
  auto ok = check_hf_config(gpt, hf_config_json(gpt));
  CHECK(ok.errors.empty());
  CHECK(ok.notes.empty());
  CHECK_FALSE(ok.tied);
  auto llama = small(model::architecture::llama);
  CHECK(check_hf_config(llama, hf_config_json(llama)).errors.empty());
  auto wrong = check_hf_config(llama, hf_config_json(gpt));
  REQUIRE(wrong.errors.size() == 1);
  CHECK(wrong.errors[0] == "model_type is 'gpt2', model.arch llama reads 'llama'");
  auto gpt2 = check_hf_config(gpt, R"({"model_type": "gpt2", "vocab_size": 256, "n_embd": 64, "n_layer": 3,
    "n_head": 4, "n_positions": 1024, "activation_function": "gelu_new"})");
  REQUIRE(gpt2.errors.size() == 1);
  CHECK(gpt2.errors[0] == "n_layer is 3, our model.layers is 2");
  CHECK(gpt2.tied); // GPT-2's default
  REQUIRE(gpt2.notes.size() == 3);
  CHECK(has(gpt2.notes[0], "tie_word_embeddings"));
  CHECK(has(gpt2.notes[1], "the first 32 position embeddings are used"));
  CHECK(has(gpt2.notes[2], "gelu_new"));
  auto gqa = check_hf_config(llama, R"({"model_type": "llama", "vocab_size": 256, "hidden_size": 64,
    "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 192,
    "rope_scaling": {"type": "linear"}})");
  CHECK(gqa.errors.size() == 2);
  CHECK(check_hf_config(gpt, "[1, 2").errors == std::vector<std::string>{"config.json is not a JSON object"});
}

TEST_CASE("safetensors: a good header parses, and bad sizes, JSON, dtypes, shapes and ranges are refused") {
  auto good = file(R"({"__metadata__": {"format": "pt"}, "a": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]},
    "b": {"dtype": "BF16", "shape": [4], "data_offsets": [24, 32]}})", 32);
  auto r = parse_safetensors(reinterpret_cast<const std::uint8_t*>(good.data()), good.size());
  REQUIRE(std::holds_alternative<safetensors_index>(r));
  auto& idx = std::get<safetensors_index>(r);
  CHECK(idx.tensors.size() == 2);
  CHECK(idx.tensors.at("a").shape == std::vector<std::int64_t>{2, 3});
  CHECK(idx.tensors.at("b").begin == 24);
  for (std::size_t n = 0; n < good.size() - 32; n += 7)
    CHECK_MESSAGE(!parse_error(good.substr(0, n)).empty(), "truncated to " << n);
  CHECK(has(parse_error(file("[1]", 0)), "not a JSON object"));
  CHECK(has(parse_error(file("{\"a\": {broken", 0)), "not a JSON object"));
  CHECK(has(parse_error(file(R"({"a": {"dtype": "I64", "shape": [1], "data_offsets": [0, 8]}})", 8)), "dtype I64"));
  CHECK(has(parse_error(file(R"({"a": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}})", 4)), "other than a size"));
  CHECK(has(parse_error(file(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 12]}})", 12)), "12 bytes for 2 F32"));
  CHECK(has(parse_error(file(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})", 4)), "outside the data"));
  CHECK(has(parse_error(file(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
    "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})", 12)), "share bytes"));
  CHECK(has(parse_error(file(R"({"a": {"dtype": "F32", "shape": [4294967296, 4294967296], "data_offsets": [0, 8]}})", 8)),
            "overflows"));
  std::string huge(8, '\xff');
  CHECK(has(parse_error(huge + "{}"), "header of"));
}
