// Top-k sparsification of activations and activation gradients for the wire (compression.mode
// adaptive, docs/compression.md), with error feedback, and the way back to a dense tensor.
// Include from .cpp files only (it exposes torch::Tensor).
#pragma once

#include <cstdint>
#include <vector>

#include <torch/types.h>

namespace gwtf::model {

/// The values kept of a tensor and their flat row-major positions (strictly increasing).
struct sparse_values {
  torch::Tensor values;               ///< 1-D, in the requested value type
  std::vector<std::uint32_t> indices; ///< one per value
};

/// About `keep` entries of largest magnitude of `t` (a float tensor of at most 2^32 elements;
/// keep is clamped to [0, numel]), as `value_type`: every row (vector along the last
/// dimension) keeps its ceil(keep / rows) largest, so no row is dropped whole. With `residual` (error feedback; an
/// undefined tensor or one of another shape counts as zero): the entries are chosen from
/// t + *residual, and *residual becomes what the receiver will not see of it, t + old
/// residual - densify(result), so that nothing is dropped for good.
sparse_values top_k(const torch::Tensor& t, std::int64_t keep, torch::ScalarType value_type,
                    torch::Tensor* residual = nullptr);

/// The dense fp32 tensor of `shape`: `values` at `indices`, zero elsewhere. The caller
/// guarantees what the wire codec checks: one index per value, each inside the shape.
torch::Tensor densify(const torch::Tensor& values, const std::vector<std::uint32_t>& indices,
                      const std::vector<std::int64_t>& shape);

} // namespace gwtf::model
