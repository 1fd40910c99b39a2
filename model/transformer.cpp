#include "model/transformer.hpp"

#include <cmath>

#include <ATen/CPUGeneratorImpl.h>

#include "model/data.hpp"

namespace gwtf::model {

namespace {

constexpr double norm_eps = 1e-5;

torch::Tensor zeros(std::vector<std::int64_t> shape) {
  return torch::zeros(shape, torch::kFloat32).set_requires_grad(true);
}

std::uint64_t name_hash(const std::string& name) {
  std::uint64_t h = 1469598103934665603ULL; // FNV-1a
  for (unsigned char c : name)
    h = (h ^ c) * 1099511628211ULL;
  return h;
}

bool ends_with(const std::string& s, const char* suffix) {
  std::string suf{suffix};
  return s.size() >= suf.size() && s.compare(s.size() - suf.size(), suf.size(), suf) == 0;
}

} // namespace

// --- entry ------------------------------------------------------------------------------

entry_part::entry_part(const model_config& cfg) : arch_(cfg.arch) {
  params_.push_back({"embed.wte", zeros({cfg.vocab, cfg.hidden})});
  if (arch_ == architecture::gpt)
    params_.push_back({"embed.wpe", zeros({cfg.seq_len, cfg.hidden})});
}

torch::Tensor entry_part::forward(const torch::Tensor& tokens) const {
  auto x = torch::embedding(params_[0].tensor, tokens);
  if (arch_ == architecture::gpt)
    x = x + params_[1].tensor.narrow(0, 0, tokens.size(1));
  return x;
}

// --- block ------------------------------------------------------------------------------

block_part::block_part(const model_config& cfg, int layer)
  : arch_(cfg.arch), heads_(cfg.heads), prefix_("blocks." + std::to_string(layer) + ".") {
  std::int64_t d = cfg.hidden;
  std::int64_t f = cfg.resolved_ffn_hidden();
  auto add = [&](const std::string& n, std::vector<std::int64_t> shape) {
    params_.push_back({prefix_ + n, zeros(std::move(shape))});
  };
  bool gpt = arch_ == architecture::gpt;
  add("norm1.weight", {d});
  if (gpt)
    add("norm1.bias", {d});
  add("attn.qkv.weight", {3 * d, d});
  if (gpt)
    add("attn.qkv.bias", {3 * d});
  add("attn.proj.weight", {d, d});
  if (gpt)
    add("attn.proj.bias", {d});
  add("norm2.weight", {d});
  if (gpt) {
    add("norm2.bias", {d});
    add("mlp.fc.weight", {f, d});
    add("mlp.fc.bias", {f});
    add("mlp.proj.weight", {d, f});
    add("mlp.proj.bias", {d});
  } else {
    add("mlp.w1.weight", {f, d});
    add("mlp.w3.weight", {f, d});
    add("mlp.proj.weight", {d, f});
  }
  std::int64_t t = cfg.seq_len;
  causal_mask_ = torch::ones({t, t}, torch::kBool).triu(1);
  if (!gpt) {
    std::int64_t hd = d / cfg.heads;
    auto inv = torch::pow(10000.0, -torch::arange(0, hd, 2, torch::kFloat64) / static_cast<double>(hd));
    auto angles = torch::outer(torch::arange(t, torch::kFloat64), inv); // [T, hd/2]
    auto full = torch::cat({angles, angles}, 1);                      // [T, hd]
    rope_cos_ = full.cos().to(torch::kFloat32);
    rope_sin_ = full.sin().to(torch::kFloat32);
  }
}

torch::Tensor block_part::param(const std::string& short_name) const {
  for (auto& p : params_)
    if (p.name.size() == prefix_.size() + short_name.size() && ends_with(p.name, short_name.c_str()))
      return p.tensor;
  return {};
}

torch::Tensor block_part::norm(const torch::Tensor& x, const char* which) const {
  auto w = param(std::string{which} + ".weight");
  if (arch_ == architecture::gpt)
    return torch::layer_norm(x, {x.size(-1)}, w, param(std::string{which} + ".bias"), norm_eps);
  // RMSNorm
  return x * torch::rsqrt(x.pow(2).mean(-1, true) + norm_eps) * w;
}

torch::Tensor block_part::forward(const torch::Tensor& x) const {
  auto b = x.size(0);
  auto t = x.size(1);
  auto d = x.size(2);
  auto hd = d / heads_;
  bool gpt = arch_ == architecture::gpt;

  // Attention: pre-norm, causal, heads in parallel.
  auto h = norm(x, "norm1");
  auto qkv = torch::linear(h, param("attn.qkv.weight"), gpt ? param("attn.qkv.bias") : torch::Tensor{});
  auto parts = qkv.view({b, t, 3, heads_, hd}).permute({2, 0, 3, 1, 4}); // [3, B, H, T, hd]
  auto q = parts[0];
  auto k = parts[1];
  auto v = parts[2];
  if (!gpt) {
    // RoPE, half-split rotation: (x1, x2) -> (x1 cos - x2 sin, x2 cos + x1 sin).
    auto cos = rope_cos_.narrow(0, 0, t);
    auto sin = rope_sin_.narrow(0, 0, t);
    auto rotate = [&](const torch::Tensor& y) {
      auto y1 = y.narrow(-1, 0, hd / 2);
      auto y2 = y.narrow(-1, hd / 2, hd / 2);
      return y * cos + torch::cat({-y2, y1}, -1) * sin;
    };
    q = rotate(q);
    k = rotate(k);
  }
  auto att = torch::matmul(q, k.transpose(-2, -1)) / std::sqrt(static_cast<double>(hd));
  att = att.masked_fill(causal_mask_.narrow(0, 0, t).narrow(1, 0, t), -INFINITY);
  att = torch::softmax(att, -1);
  auto y = torch::matmul(att, v).transpose(1, 2).reshape({b, t, d});
  y = torch::linear(y, param("attn.proj.weight"), gpt ? param("attn.proj.bias") : torch::Tensor{});
  auto x1 = x + y;

  // MLP: GELU (gpt) or SwiGLU (llama).
  auto h2 = norm(x1, "norm2");
  torch::Tensor m;
  if (gpt) {
    m = torch::gelu(torch::linear(h2, param("mlp.fc.weight"), param("mlp.fc.bias")));
    m = torch::linear(m, param("mlp.proj.weight"), param("mlp.proj.bias"));
  } else {
    m = torch::silu(torch::linear(h2, param("mlp.w1.weight"))) * torch::linear(h2, param("mlp.w3.weight"));
    m = torch::linear(m, param("mlp.proj.weight"));
  }
  return x1 + m;
}

// --- exit -------------------------------------------------------------------------------

exit_part::exit_part(const model_config& cfg) : arch_(cfg.arch) {
  params_.push_back({"head.norm.weight", zeros({cfg.hidden})});
  if (arch_ == architecture::gpt)
    params_.push_back({"head.norm.bias", zeros({cfg.hidden})});
  params_.push_back({"head.lm_head.weight", zeros({cfg.vocab, cfg.hidden})});
}

torch::Tensor exit_part::forward(const torch::Tensor& x) const {
  torch::Tensor h;
  if (arch_ == architecture::gpt)
    h = torch::layer_norm(x, {x.size(-1)}, params_[0].tensor, params_[1].tensor, norm_eps);
  else
    h = x * torch::rsqrt(x.pow(2).mean(-1, true) + norm_eps) * params_[0].tensor;
  return torch::linear(h, params_.back().tensor);
}

torch::Tensor lm_loss(const torch::Tensor& logits, const torch::Tensor& targets) {
  return torch::cross_entropy_loss(logits.reshape({-1, logits.size(-1)}), targets.reshape({-1}));
}

void init_parameters(const std::vector<named_parameter>& params, std::uint64_t seed, int layers) {
  torch::NoGradGuard no_grad;
  for (auto& p : params) {
    auto& n = p.name;
    if (ends_with(n, ".bias")) {
      p.tensor.zero_();
    } else if (n.find("norm") != std::string::npos) {
      p.tensor.fill_(1.0);
    } else {
      double std_dev = 0.02;
      if (ends_with(n, "attn.proj.weight") || ends_with(n, "mlp.proj.weight"))
        std_dev = 0.02 / std::sqrt(2.0 * layers); // residual projections (GPT-2)
      auto gen = at::detail::createCPUGenerator(mix64(seed ^ name_hash(n)));
      p.tensor.normal_(0.0, std_dev, gen);
    }
  }
}

std::pair<torch::Tensor, torch::Tensor> to_inputs_targets(int rows, int cols,
                                                          const std::vector<std::int32_t>& tokens) {
  auto all = torch::from_blob(const_cast<std::int32_t*>(tokens.data()), {rows, cols}, torch::kInt32)
               .to(torch::kInt64);
  return {all.narrow(1, 0, cols - 1).contiguous(), all.narrow(1, 1, cols - 1).contiguous()};
}

} // namespace gwtf::model
