#include "model/optimizer.hpp"

#include <algorithm>
#include <cmath>

namespace gwtf::model {

namespace {
constexpr double adam_eps = 1e-8;
constexpr double pi = 3.14159265358979323846;
} // namespace

double learning_rate(const training_config& cfg, std::int64_t iteration) {
  if (iteration < cfg.warmup_iterations)
    return cfg.lr * static_cast<double>(iteration + 1) / static_cast<double>(cfg.warmup_iterations);
  std::int64_t decay = std::max<std::int64_t>(1, cfg.iterations - 1 - cfg.warmup_iterations);
  double progress = std::min(1.0, static_cast<double>(iteration - cfg.warmup_iterations)
                                    / static_cast<double>(decay));
  return cfg.min_lr + 0.5 * (1.0 + std::cos(pi * progress)) * (cfg.lr - cfg.min_lr);
}

double clip_coefficient(double total_norm, double clip) {
  if (clip <= 0 || !(total_norm > clip))
    return 1.0;
  return clip / (total_norm + 1e-6);
}

double squared_norm(const std::vector<torch::Tensor>& tensors) {
  double sum = 0;
  for (auto& t : tensors)
    sum += t.to(torch::kFloat64).pow(2).sum().item<double>();
  return sum;
}

adamw::adamw(std::vector<named_parameter> params, const training_config& cfg,
             const std::function<torch::Tensor(const torch::Tensor&)>& zeros)
  : params_(std::move(params)),
    beta1_(cfg.beta1),
    beta2_(cfg.beta2),
    weight_decay_(cfg.weight_decay) {
  for (auto& p : params_)
    for (auto* moments : {&m_, &v_})
      moments->push_back(zeros ? zeros(p.tensor) : torch::zeros_like(p.tensor, torch::MemoryFormat::Contiguous).detach());
}

void adamw::step(const std::vector<torch::Tensor>& grads, double lr, double grad_scale,
                 const std::function<void(std::size_t)>& before) {
  torch::NoGradGuard no_grad;
  ++steps_;
  double bias1 = 1.0 - std::pow(beta1_, static_cast<double>(steps_));
  double bias2 = 1.0 - std::pow(beta2_, static_cast<double>(steps_));
  for (std::size_t i = 0; i < params_.size(); ++i) {
    if (before)
      before(i);
    auto& p = params_[i].tensor;
    auto g = grad_scale == 1.0 ? grads[i] : grads[i] * grad_scale;
    if (p.dim() >= 2 && weight_decay_ > 0)
      p.mul_(1.0 - lr * weight_decay_);
    m_[i].mul_(beta1_).add_(g, 1.0 - beta1_);
    v_[i].mul_(beta2_).addcmul_(g, g, 1.0 - beta2_);
    auto denom = (v_[i] / bias2).sqrt_().add_(adam_eps);
    p.addcdiv_(m_[i], denom, -lr / bias1);
  }
}

} // namespace gwtf::model
