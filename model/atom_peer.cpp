#include "model/atom_peer.hpp"

#include <cstring>
#include <string>

#include <torch/torch.h>

namespace gwtf::model {

atom_peer::atom_peer(const model_config& model, const training_config& training, const swap_options& relays)
  : pipeline_(model, training, relays) {}

outcome<double> atom_peer::train(std::uint64_t mb, const microbatch_tokens& tokens) {
  return pipeline_.run_microbatch(mb, tokens);
}

outcome<double> atom_peer::step(std::int64_t iteration) { return pipeline_.apply(iteration); }

std::vector<torch::Tensor> atom_peer::tensors() const {
  std::vector<torch::Tensor> out;
  auto& p = pipeline_;
  for (int s = 0; s < p.stages(); ++s)
    for (auto& n : p.at(s).parameters())
      out.push_back(n.tensor);
  return out;
}

torch::Tensor atom_peer::contribution() const {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> flat;
  for (auto& t : tensors())
    flat.push_back(t.detach().reshape({-1}));
  return torch::cat(flat).to(torch::kFloat32).contiguous();
}

outcome<bool> atom_peer::land(const torch::Tensor& average, const torch::Tensor& contributed) {
  auto n = parameter_count();
  for (auto* t : {&average, &contributed})
    if (t->dim() != 1 || t->numel() != n || t->scalar_type() != torch::kFloat32)
      return "atom average: expected " + std::to_string(n) + " fp32 values, got " + std::to_string(t->numel());
  torch::NoGradGuard no_grad;
  std::int64_t off = 0;
  for (auto& t : tensors()) {
    auto k = t.numel();
    auto avg = average.narrow(0, off, k).view(t.sizes());
    auto sent = contributed.narrow(0, off, k).view(t.sizes());
    t.copy_(avg + (t - sent)); // t == sent (no step since): exactly avg
    off += k;
  }
  return true;
}

std::vector<std::uint8_t> atom_peer::export_state() const {
  auto& p = pipeline_;
  std::vector<std::uint8_t> out;
  for (int s = 0; s < p.stages(); ++s) {
    auto blob = p.at(s).export_state();
    std::uint64_t n = blob.size();
    auto at = out.size();
    out.resize(at + 8 + blob.size());
    std::memcpy(out.data() + at, &n, 8);
    std::memcpy(out.data() + at + 8, blob.data(), blob.size());
  }
  return out;
}

namespace {

// The stages' blobs of an export_state(): (offset, size) each, or why they are not.
outcome<std::vector<std::pair<std::size_t, std::size_t>>> split_state(const std::uint8_t* data, std::size_t size,
                                                                      int stages) {
  std::vector<std::pair<std::size_t, std::size_t>> parts;
  std::size_t at = 0;
  for (int s = 0; s < stages; ++s) {
    std::uint64_t n = 0;
    if (size - at < 8)
      return "atom state: stage " + std::to_string(s) + "'s size is cut off";
    std::memcpy(&n, data + at, 8);
    if (n > size - at - 8)
      return "atom state: stage " + std::to_string(s) + " announces " + std::to_string(n) + " bytes, "
             + std::to_string(size - at - 8) + " are left";
    parts.emplace_back(at + 8, static_cast<std::size_t>(n));
    at += 8 + static_cast<std::size_t>(n);
  }
  if (at != size)
    return "atom state: " + std::to_string(size - at) + " bytes after the last stage";
  return parts;
}

} // namespace

outcome<bool> atom_peer::import_state(const std::uint8_t* data, std::size_t size) {
  auto split = split_state(data, size, pipeline_.stages());
  if (auto* e = std::get_if<std::string>(&split))
    return *e;
  auto& parts = std::get<0>(split);
  // A stage refuses a bad blob unchanged; the stages loaded before it are put back.
  auto before = export_state();
  auto undo = std::get<0>(split_state(before.data(), before.size(), pipeline_.stages()));
  for (std::size_t s = 0; s < parts.size(); ++s) {
    auto r = pipeline_.at(static_cast<int>(s)).import_state(data + parts[s].first, parts[s].second);
    if (auto* e = std::get_if<std::string>(&r)) {
      for (std::size_t back = 0; back < s; ++back)
        pipeline_.at(static_cast<int>(back)).import_state(before.data() + undo[back].first, undo[back].second);
      return "atom state: stage " + std::to_string(s) + ": " + *e;
    }
  }
  return true;
}

std::int64_t atom_peer::parameter_count() const {
  std::int64_t n = 0;
  for (auto& t : tensors())
    n += t.numel();
  return n;
}

std::uint64_t atom_peer::weights_hash() const {
  auto& p = pipeline_;
  std::uint64_t h = 1469598103934665603ull;
  for (int s = 0; s < p.stages(); ++s) {
    h ^= p.at(s).weights_hash();
    h *= 1099511628211ull;
  }
  return h;
}

int atom_peer::resident_blocks() const {
  auto& p = pipeline_;
  int n = 0;
  for (int s = 1; s < p.stages(); ++s)
    n += p.at(s).resident_blocks();
  return n;
}

outcome<torch::Tensor> average_parameters(const std::vector<std::pair<std::int64_t, torch::Tensor>>& contributions) {
  if (contributions.empty())
    return std::string{"atom average: no contribution"};
  std::int64_t total = 0;
  for (auto& [count, values] : contributions) {
    if (count < 1)
      return "atom average: a contribution of " + std::to_string(count) + " microbatches";
    if (values.sizes() != contributions.front().second.sizes())
      return std::string{"atom average: contributions of different shapes"};
    total += count;
  }
  torch::NoGradGuard no_grad;
  auto sum = contributions.front().second.to(torch::kFloat64) * static_cast<double>(contributions.front().first);
  for (std::size_t i = 1; i < contributions.size(); ++i)
    sum.add_(contributions[i].second.to(torch::kFloat64), static_cast<double>(contributions[i].first));
  return (sum / static_cast<double>(total)).to(torch::kFloat32);
}

} // namespace gwtf::model
