#include "model/exact_sums.hpp"

#include <cmath>

#include <torch/torch.h>

#include "model/share_codec.hpp"

namespace gwtf::model {

namespace {

const double grid = std::ldexp(1.0, exact_sum_fraction_bits);
const double limit = std::ldexp(1.0, exact_sum_clamp_bits);

} // namespace

torch::Tensor to_exact(const torch::Tensor& g) {
  torch::NoGradGuard no_grad;
  // A float32 times a power of two is exact (2^40 * 32 is far from float32's overflow), and so
  // are round() (half to even) and the cast of an integer-valued float32 below 2^45: the
  // rounding to the grid is the only one.
  auto scaled = g.detach().to(torch::kFloat).mul(static_cast<float>(grid)); // the one new float tensor
  return scaled.nan_to_num_(0.0, limit, -limit).round_().clamp_(-limit, limit).to(torch::kLong);
}

torch::Tensor exact_average(const torch::Tensor& sum, std::int64_t count) {
  torch::NoGradGuard no_grad;
  return sum.to(torch::kDouble).div_(grid).div_(static_cast<double>(count)).to(torch::kFloat);
}

bool is_exact(const torch::Tensor& t) {
  return t.defined() && t.scalar_type() == torch::kLong;
}

} // namespace gwtf::model
