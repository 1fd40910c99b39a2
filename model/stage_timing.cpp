#include "model/stage_timing.hpp"

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <variant>
#include <vector>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include "model/partition.hpp"
#include "model/sizing.hpp"
#include "model/stage.hpp"

namespace gwtf::model {

namespace {

template <class T>
T value_of(outcome<T> r, const char* what) {
  if (auto* err = std::get_if<std::string>(&r))
    throw std::runtime_error(std::string{what} + ": " + *err);
  return std::get<T>(std::move(r));
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Runs `step(mb)` once to warm up, then `repetitions` times; the median in seconds.
template <class F>
double timed(int repetitions, F&& step) {
  step(0);
  std::vector<double> s;
  for (int k = 1; k <= repetitions; ++k) {
    auto t0 = std::chrono::steady_clock::now();
    step(static_cast<std::uint64_t>(k));
    s.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return median(std::move(s));
}

} // namespace

stage_times time_stages(const model_config& model, const training_config& training, int repetitions) {
  stage_times out;
  out.repetitions = repetitions;
  auto batch = static_cast<std::int64_t>(training.microbatch_size);
  auto seq = static_cast<std::int64_t>(model.seq_len);
  auto gen = at::detail::createCPUGenerator(training.seed);
  auto tokens = torch::randint(model.vocab, {batch, seq}, gen, torch::kLong);
  auto targets = torch::randint(model.vocab, {batch, seq}, gen, torch::kLong);

  stage holder{model, training, 0};
  out.holder_s = timed(repetitions, [&](std::uint64_t mb) {
    auto x = value_of(holder.embed(mb, tokens), "embedding forward");
    auto head = value_of(holder.head(mb, x.detach(), targets), "head");
    value_of(holder.embed_backward(mb, head.grad_input), "embedding backward");
  });

  if (model.stages >= 2) {
    auto heaviest = heaviest_relay_stage(model);
    stage relay{model, training, heaviest.stage};
    auto input = torch::randn({batch, seq, static_cast<std::int64_t>(model.hidden)}, gen);
    auto grad = torch::randn({batch, seq, static_cast<std::int64_t>(model.hidden)}, gen);
    out.relay_s = timed(repetitions, [&](std::uint64_t mb) {
      value_of(relay.forward(mb, input), "relay forward");
      value_of(relay.backward(mb, grad), "relay backward");
    });
  }
  return out;
}

} // namespace gwtf::model
