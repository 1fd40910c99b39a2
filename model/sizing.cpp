#include "model/sizing.hpp"

#include <algorithm>
#include <cmath>

namespace gwtf::model {

std::int64_t block_parameters(const model_config& cfg) {
  std::int64_t d = cfg.hidden, f = cfg.resolved_ffn_hidden();
  if (cfg.arch == architecture::gpt)
    return 2 * (2 * d)               // norm1, norm2: weight + bias
           + (3 * d * d + 3 * d)     // attn.qkv
           + (d * d + d)             // attn.proj
           + (f * d + f)             // mlp.fc
           + (d * f + d);            // mlp.proj
  return 2 * d                       // norm1, norm2: weight
         + 3 * d * d + d * d         // attn.qkv, attn.proj
         + 3 * f * d;                // mlp.w1, w3, proj
}

std::int64_t entry_parameters(const model_config& cfg) {
  std::int64_t wte = static_cast<std::int64_t>(cfg.vocab) * cfg.hidden;
  return cfg.arch == architecture::gpt ? wte + static_cast<std::int64_t>(cfg.seq_len) * cfg.hidden : wte;
}

std::int64_t exit_parameters(const model_config& cfg) {
  std::int64_t norm = cfg.arch == architecture::gpt ? 2 * cfg.hidden : cfg.hidden;
  return norm + static_cast<std::int64_t>(cfg.vocab) * cfg.hidden;
}

std::int64_t model_parameters(const model_config& cfg) {
  return entry_parameters(cfg) + cfg.layers * block_parameters(cfg) + exit_parameters(cfg);
}

stage_size size_of(const model_config& cfg, const stage_span& span) {
  double d = cfg.hidden, f = cfg.resolved_ffn_hidden(), t = cfg.seq_len, v = cfg.vocab;
  double mlp = cfg.arch == architecture::gpt ? 2 * d * f : 3 * d * f;
  // Per token: the linear layers' multiply-adds, then q.k over t keys and the mix of t values.
  double block = 2 * (4 * d * d + mlp) + 2 * 2 * t * d;
  stage_size s;
  s.parameters = span.blocks() * block_parameters(cfg);
  s.forward_flops_per_token = span.blocks() * block;
  if (span.entry)
    s.parameters += entry_parameters(cfg);
  if (span.exit) {
    s.parameters += exit_parameters(cfg);
    s.forward_flops_per_token += 2 * d * v; // the LM head
  }
  return s;
}

stage_span heaviest_relay_stage(const model_config& cfg) {
  auto spans = partition(cfg);
  if (spans.size() < 2)
    return spans.front();
  return *std::max_element(spans.begin() + 1, spans.end(),
                           [](const stage_span& a, const stage_span& b) { return a.blocks() < b.blocks(); });
}

double relay_gradient_bytes(const model_config& cfg, double bytes_per_value) {
  if (partition(cfg).size() < 2)
    return 0;
  return static_cast<double>(size_of(cfg, heaviest_relay_stage(cfg)).parameters) * bytes_per_value;
}

memory_estimate estimate_memory(const model_config& cfg, const stage_span& span, int microbatch_size, int capacity,
                                int replicas, int holders, bool rematerialize, sum_order sums,
                                int microbatches_per_holder) {
  memory_estimate m;
  auto p = static_cast<double>(size_of(cfg, span).parameters) * 4;
  m.weights = p;
  m.optimizer = 2 * p;
  // Sums kept besides autograd's gradients of one microbatch: a relay counts any holder's
  // microbatches, a data holder (stage 0) its own only.
  double copies = span.stage == 0 ? 1 : std::max(1, holders);
  if (sums == sum_order::key_order)
    copies *= std::max(1, microbatches_per_holder);
  else if (sums == sum_order::exact)
    copies *= 2; // int64
  m.gradients = p * (1 + copies);
  m.shares = p * std::max(1, replicas) * (sums == sum_order::exact ? 2 : 1);
  double b = microbatch_size, s = cfg.seq_len, h = cfg.hidden, a = cfg.heads;
  double input = b * s * h * 4;
  double per_block = b * s * h * (68 + 10 * a * s / h);
  double blocks = static_cast<double>(span.blocks());
  if (span.stage == 0)
    m.activations = capacity * input + 3 * b * s * static_cast<double>(cfg.vocab) * 4;
  else if (rematerialize)
    m.activations = capacity * input + blocks * per_block;
  else
    m.activations = capacity * blocks * per_block;
  return m;
}

budget_plan plan_budget(const model_config& cfg, const stage_span& span, int microbatch_size, int capacity,
                    double budget_bytes, bool rematerialize) {
  budget_plan p;
  p.capacity = std::max(1, capacity);
  int blocks = span.blocks();
  if (budget_bytes <= 0 || span.stage == 0 || blocks == 0)
    return p;
  double block_state = static_cast<double>(block_parameters(cfg)) * 16; // weights, two moments, one sum
  double b = microbatch_size, s = cfg.seq_len, h = cfg.hidden, a = cfg.heads;
  double input = b * s * h * 4;
  auto fit = [&](double room, double per_microbatch) {
    return static_cast<int>(std::clamp(std::floor(room / per_microbatch), 1.0, static_cast<double>(p.capacity)));
  };
  if (block_state * blocks > budget_bytes) {
    p.swapped = true;
    double stash = blocks * input; // one rematerialising segment per block: each keeps its input
    p.capacity = fit(budget_bytes - block_state, stash);
    p.pool = static_cast<int>(
      std::clamp(std::floor((budget_bytes - p.capacity * stash) / block_state), 1.0, static_cast<double>(blocks)));
    return p;
  }
  double per_block = b * s * h * (68 + 10 * a * s / h);
  p.capacity = fit(budget_bytes - block_state * blocks, rematerialize ? input : blocks * per_block);
  return p;
}

} // namespace gwtf::model
