// AdamW with global-norm clipping and a warm-up + cosine schedule, written out by hand so
// that its state can be exported to a joining replica and so that the unpartitioned
// reference and every pipeline stage take bit-identical steps.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include <torch/types.h>

#include "model/model_config.hpp"
#include "model/transformer.hpp"

namespace gwtf::model {

/// Learning rate at `iteration`: linear warm-up to lr, then cosine decay to min_lr at the
/// last iteration.
double learning_rate(const training_config& cfg, std::int64_t iteration);

/// Factor that scales gradients of global norm `total_norm` down to `clip` (1 if already
/// below, or clipping off with clip = 0).
double clip_coefficient(double total_norm, double clip);

/// Sum of squared entries of every tensor (one part of a global gradient norm).
double squared_norm(const std::vector<torch::Tensor>& tensors);

/// AdamW over a fixed list of parameters. Decoupled weight decay applies to matrices
/// (dim >= 2) only, not to biases and norm weights.
class adamw {
public:
  /// `zeros`, when set, makes each moment (a zero tensor shaped like its parameter): a
  /// swapped stage keeps them in its file.
  adamw(std::vector<named_parameter> params, const training_config& cfg,
        const std::function<torch::Tensor(const torch::Tensor&)>& zeros = {});

  /// One step with `grads` (aligned with the parameters) multiplied by `grad_scale`;
  /// `before`, when set, is called with each parameter's index before it steps (a swapped
  /// stage brings its block in).
  void step(const std::vector<torch::Tensor>& grads, double lr, double grad_scale,
            const std::function<void(std::size_t)>& before = {});

  /// Steps taken so far.
  std::int64_t steps() const { return steps_; }

  /// First and second moments, aligned with the parameters (for export/import).
  std::vector<torch::Tensor>& first_moments() { return m_; }
  std::vector<torch::Tensor>& second_moments() { return v_; }
  const std::vector<torch::Tensor>& first_moments() const { return m_; }
  const std::vector<torch::Tensor>& second_moments() const { return v_; }
  void set_steps(std::int64_t n) { steps_ = n; }

private:
  std::vector<named_parameter> params_;
  std::vector<torch::Tensor> m_;
  std::vector<torch::Tensor> v_;
  double beta1_;
  double beta2_;
  double weight_decay_;
  std::int64_t steps_ = 0;
};

} // namespace gwtf::model
