#include "model/sparse.hpp"

#include <algorithm>
#include <cstring>

#include <torch/torch.h>

namespace gwtf::model {

sparse_values top_k(const torch::Tensor& t, std::int64_t keep, torch::ScalarType value_type,
                    torch::Tensor* residual) {
  torch::NoGradGuard no_grad;
  // Rows are the last dimension's vectors (one token's hidden state): each keeps the same
  // share, so that no token arrives as all zeros (a LayerNorm of a zero row multiplies its
  // gradient by 1/sqrt(eps): found in the demo, the backward overflowed fp16 in 6 iterations).
  auto cols = t.dim() > 0 ? t.size(-1) : 1;
  auto x = t.to(torch::kFloat).reshape({-1, std::max<std::int64_t>(cols, 1)});
  if (residual && residual->defined() && residual->numel() == x.numel())
    x = x + residual->to(torch::kFloat).reshape(x.sizes());
  auto rows = x.size(0);
  keep = std::clamp<std::int64_t>(keep, 0, x.numel());
  auto per_row = rows > 0 ? std::min<std::int64_t>((keep + rows - 1) / rows, x.size(1)) : 0;
  sparse_values out;
  if (per_row == 0) {
    out.values = torch::empty({0}, torch::TensorOptions().dtype(value_type));
    if (residual)
      *residual = x.reshape(t.sizes()).clone();
    return out;
  }
  // Per row the positions of the largest magnitudes, in increasing order: flat positions
  // row * cols + col then increase strictly, as the wire requires.
  auto cols_picked = std::get<0>(std::get<1>(x.abs().topk(per_row, 1, /*largest=*/true, /*sorted=*/false)).sort(1));
  auto picked = (cols_picked + torch::arange(rows, torch::kLong).unsqueeze(1) * x.size(1)).reshape({-1});
  auto flat = x.reshape({-1});
  out.values = flat.index_select(0, picked).to(value_type).contiguous();
  auto idx = picked.to(torch::kInt).contiguous();
  out.indices.resize(static_cast<std::size_t>(idx.numel()));
  std::memcpy(out.indices.data(), idx.data_ptr<std::int32_t>(), out.indices.size() * sizeof(std::uint32_t));
  if (residual) {
    // What the receiver rebuilds: the kept values after rounding; the rest stays here.
    auto rest = flat.clone();
    rest.index_put_({picked}, flat.index_select(0, picked) - out.values.to(torch::kFloat));
    *residual = rest.reshape(t.sizes());
  }
  return out;
}

torch::Tensor densify(const torch::Tensor& values, const std::vector<std::uint32_t>& indices,
                      const std::vector<std::int64_t>& shape) {
  torch::NoGradGuard no_grad;
  auto out = torch::zeros(shape, torch::kFloat);
  if (indices.empty())
    return out;
  auto idx = torch::from_blob(const_cast<std::uint32_t*>(indices.data()),
                              {static_cast<std::int64_t>(indices.size())}, torch::kInt)
               .to(torch::kLong);
  out.reshape({-1}).index_put_({idx}, values.to(torch::kFloat).reshape({-1}));
  return out;
}

} // namespace gwtf::model
