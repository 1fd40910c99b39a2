#include "model/pipeline.hpp"

#include <cmath>

namespace gwtf::model {

namespace {

template <class T>
bool failed(const outcome<T>& r, std::string& why) {
  if (auto* e = std::get_if<std::string>(&r)) {
    why = *e;
    return true;
  }
  return false;
}

} // namespace

local_pipeline::local_pipeline(const model_config& model, const training_config& training, const swap_options& relays) {
  for (int s = 0; s < model.stages; ++s)
    stages_.emplace_back(model, training, s, false, s == 0 ? swap_options{} : relays);
}

outcome<double> local_pipeline::run_microbatch(std::uint64_t mb, const microbatch_tokens& tokens) {
  std::string why;
  auto [inputs, targets] = to_inputs_targets(tokens.rows, tokens.cols, tokens.tokens);
  auto x = stages_[0].embed(mb, inputs);
  if (failed(x, why))
    return why;
  auto act = std::get<torch::Tensor>(x);
  for (std::size_t s = 1; s < stages_.size(); ++s) {
    auto y = stages_[s].forward(mb, act);
    if (failed(y, why))
      return why;
    act = std::get<torch::Tensor>(y);
  }
  auto h = stages_[0].head(mb, act, targets);
  if (failed(h, why))
    return why;
  auto grad = std::get<head_result>(h).grad_input;
  for (std::size_t s = stages_.size() - 1; s >= 1; --s) {
    auto g = stages_[s].backward(mb, grad);
    if (failed(g, why))
      return why;
    grad = std::get<torch::Tensor>(g);
  }
  auto done = stages_[0].embed_backward(mb, grad);
  if (failed(done, why))
    return why;
  return std::get<head_result>(h).loss;
}

outcome<double> local_pipeline::apply(std::int64_t iteration) {
  std::vector<std::vector<torch::Tensor>> averaged;
  double sq = 0;
  for (auto& st : stages_) {
    auto g = st.gradients();
    if (auto* e = std::get_if<std::string>(&g))
      return *e;
    averaged.push_back(average({std::get<gradient_sum>(g)}));
    sq += stage::squared_norm(averaged.back());
  }
  double norm = std::sqrt(sq);
  for (std::size_t s = 0; s < stages_.size(); ++s) {
    auto r = stages_[s].apply(averaged[s], iteration, norm);
    if (auto* e = std::get_if<std::string>(&r))
      return *e;
  }
  return norm;
}

} // namespace gwtf::model
