// Exact gradient sums (training.reproducible_sums: exact; docs/model.md, "Reproducible
// sums"): each microbatch's gradient is rounded once onto a fixed absolute grid of 2^-40 and
// added as int64. Integer addition is associative, so a stage's sum over its microbatches
// has the same bits however they were grouped over replicas and ordered by the network; the
// average is converted back to float32 once. The grid and its bounds live in
// model/share_codec.hpp (exact_sum_*), which the configs are validated against.
#pragma once

#include <cstdint>

#include <torch/types.h>

namespace gwtf::model {

/// `g` (float32) on the grid: round(g * 2^40) as int64, half to even, clamped to +-2^45
/// (|g| <= 32; an infinity is clamped too, a NaN counts as 0: the loss still shows it).
torch::Tensor to_exact(const torch::Tensor& g);

/// The float32 average of int64 grid sums over `count` microbatches: sum * 2^-40 / count,
/// computed in float64 and rounded once.
torch::Tensor exact_average(const torch::Tensor& sum, std::int64_t count);

/// Whether `t` holds exact sums (int64) rather than float32 ones.
bool is_exact(const torch::Tensor& t);

} // namespace gwtf::model
