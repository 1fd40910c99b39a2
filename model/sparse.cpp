#include "model/sparse.hpp"

#include <algorithm>
#include <cstring>

#include <torch/torch.h>

namespace gwtf::model {

sparse_values top_k(const torch::Tensor& t, std::int64_t keep, torch::ScalarType value_type,
                    torch::Tensor* residual) {
  torch::NoGradGuard no_grad;
  auto x = t.to(torch::kFloat).reshape({-1});
  if (residual && residual->defined() && residual->numel() == x.numel())
    x = x + residual->to(torch::kFloat).reshape({-1});
  keep = std::clamp<std::int64_t>(keep, 0, x.numel());
  // Positions of the `keep` largest magnitudes, then in increasing order for the wire.
  auto picked = std::get<1>(x.abs().topk(keep, 0, /*largest=*/true, /*sorted=*/false));
  picked = std::get<0>(picked.sort());
  sparse_values out;
  out.values = x.index_select(0, picked).to(value_type).contiguous();
  auto idx = picked.to(torch::kInt).contiguous();
  out.indices.resize(static_cast<std::size_t>(keep));
  if (keep > 0)
    std::memcpy(out.indices.data(), idx.data_ptr<std::int32_t>(), out.indices.size() * sizeof(std::uint32_t));
  if (residual) {
    // What the receiver rebuilds: the kept values after rounding; the rest stays here.
    auto rest = x.clone();
    rest.index_put_({picked}, x.index_select(0, picked) - out.values.to(torch::kFloat));
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
