#include "model/reference.hpp"

#include <chrono>
#include <cmath>
#include <optional>

#include "model/optimizer.hpp"
#include "model/segment.hpp"

namespace gwtf::model {

struct reference_model::impl {
  model_config model;
  training_config training;
  entry_part entry;
  std::vector<block_part> blocks;
  exit_part exit;
  std::optional<detail::segment> whole;
  std::optional<adamw> optimizer;

  impl(const model_config& m, const training_config& t) : model(m), training(t), entry(m), exit(m) {
    for (int l = 0; l < m.layers; ++l)
      blocks.emplace_back(m, l);
    auto params = all();
    init_parameters(params, t.seed, m.layers);
    whole.emplace(params, [this](const torch::Tensor& tokens) {
      auto x = entry.forward(tokens);
      for (auto& b : blocks)
        x = b.forward(x);
      return exit.forward(x);
    });
    whole->set_sum_order(t.reproducible_sums);
    optimizer.emplace(params, t);
  }

  std::vector<named_parameter> all() const {
    std::vector<named_parameter> out = entry.parameters();
    for (auto& b : blocks)
      out.insert(out.end(), b.parameters().begin(), b.parameters().end());
    out.insert(out.end(), exit.parameters().begin(), exit.parameters().end());
    return out;
  }
};

reference_model::reference_model(const model_config& model, const training_config& training)
  : impl_(std::make_unique<impl>(model, training)) {}
reference_model::~reference_model() = default;

std::vector<named_parameter> reference_model::parameters() const {
  return impl_->all();
}

double reference_model::accumulate(std::uint64_t mb, const microbatch_tokens& tokens) {
  auto [inputs, targets] = to_inputs_targets(tokens.rows, tokens.cols, tokens.tokens);
  return impl_->whole->loss_backward(mb, inputs, targets, false).first;
}

gradient_sum reference_model::gradients() const {
  gradient_sum out;
  out.sums = impl_->whole->sums();
  out.count = static_cast<std::int64_t>(impl_->whole->count());
  return out;
}

double reference_model::apply(std::int64_t iteration) {
  auto [avg, norm] = take_average();
  step(avg, norm, iteration);
  return norm;
}

std::pair<std::vector<torch::Tensor>, double> reference_model::take_average() {
  auto avg = average({gradients()});
  double norm = std::sqrt(squared_norm(avg));
  impl_->whole->reset();
  return {std::move(avg), norm};
}

void reference_model::step(const std::vector<torch::Tensor>& averaged, double norm, std::int64_t iteration) {
  impl_->optimizer->step(averaged, learning_rate(impl_->training, iteration),
                         clip_coefficient(norm, impl_->training.grad_clip));
}

outcome<bool> run_reference(const model_config& model, const training_config& training,
                            const data_config& data, int holders,
                            const std::function<void(const reference_report&)>& on_iteration,
                            averaging_mode averaging) {
  auto opened = corpus::open(data, model.vocab, model.seq_len);
  if (auto* err = std::get_if<std::string>(&opened))
    return *err;
  auto& text = std::get<corpus>(opened);
  reference_model ref{model, training};
  using clock = std::chrono::steady_clock;
  struct pending_step {
    std::vector<torch::Tensor> averaged;
    double norm = 0;
    std::int64_t iteration = 0;
  };
  std::optional<pending_step> pending; // overlap: the step of the iteration before, not yet taken
  for (std::int64_t it = 0; it < training.iterations; ++it) {
    auto start = clock::now();
    double loss_sum = 0;
    int count = 0;
    for (int h = 0; h < holders; ++h)
      for (int i = 0; i < training.microbatches_per_holder; ++i) {
        microbatch_id id{static_cast<std::uint64_t>(it), static_cast<std::uint32_t>(h),
                         static_cast<std::uint32_t>(i)};
        loss_sum += ref.accumulate(id.key(), sample(text, training.seed, id,
                                                    training.microbatch_size, model.seq_len));
        ++count;
      }
    reference_report rep;
    rep.iteration = it;
    rep.lr = learning_rate(training, it);
    if (averaging == averaging_mode::sync) {
      rep.grad_norm = ref.apply(it);
    } else {
      auto [avg, norm] = ref.take_average();
      if (pending)
        ref.step(pending->averaged, pending->norm, pending->iteration);
      pending = pending_step{std::move(avg), norm, it};
      rep.grad_norm = norm;
    }
    rep.loss = loss_sum / count;
    double secs = std::chrono::duration<double>(clock::now() - start).count();
    rep.tokens_per_s = static_cast<double>(count) * training.microbatch_size * model.seq_len / secs;
    on_iteration(rep);
  }
  if (pending) // the last update lands after the last iteration
    ref.step(pending->averaged, pending->norm, pending->iteration);
  return true;
}

outcome<bool> run_atom_reference(const model_config& model, const training_config& training,
                                 const data_config& data, int peers, int sync_every,
                                 const std::function<void(const reference_report&)>& on_iteration) {
  if (peers < 1 || sync_every < 1)
    return "atom reference: " + std::to_string(peers) + " peers, sync_every " + std::to_string(sync_every)
           + ": both must be at least 1";
  auto opened = corpus::open(data, model.vocab, model.seq_len);
  if (auto* err = std::get_if<std::string>(&opened))
    return *err;
  auto& text = std::get<corpus>(opened);
  std::vector<std::unique_ptr<reference_model>> peer;
  for (int p = 0; p < peers; ++p)
    peer.push_back(std::make_unique<reference_model>(model, training)); // same seed: identical starts
  // The peers' parameters, each replaced by their mean (summed in peer order).
  auto average_parameters = [&] {
    torch::NoGradGuard no_grad;
    std::vector<std::vector<named_parameter>> params;
    for (auto& r : peer)
      params.push_back(r->parameters());
    for (std::size_t k = 0; k < params[0].size(); ++k) {
      auto mean = params[0][k].tensor.clone();
      for (std::size_t p = 1; p < params.size(); ++p)
        mean.add_(params[p][k].tensor);
      mean.div_(static_cast<double>(params.size()));
      for (auto& ps : params)
        ps[k].tensor.copy_(mean);
    }
  };
  using clock = std::chrono::steady_clock;
  for (std::int64_t it = 0; it < training.iterations; ++it) {
    auto start = clock::now();
    double loss_sum = 0, norm_sum = 0;
    int count = 0;
    for (int p = 0; p < peers; ++p) {
      for (int i = 0; i < training.microbatches_per_holder; ++i) {
        microbatch_id id{static_cast<std::uint64_t>(it), static_cast<std::uint32_t>(p), static_cast<std::uint32_t>(i)};
        loss_sum += peer[static_cast<std::size_t>(p)]->accumulate(
          id.key(), sample(text, training.seed, id, training.microbatch_size, model.seq_len));
        ++count;
      }
      norm_sum += peer[static_cast<std::size_t>(p)]->apply(it);
    }
    if (peers > 1 && ((it + 1) % sync_every == 0 || it + 1 == training.iterations))
      average_parameters();
    reference_report rep;
    rep.iteration = it;
    rep.lr = learning_rate(training, it);
    rep.grad_norm = norm_sum / peers;
    rep.loss = loss_sum / count;
    double secs = std::chrono::duration<double>(clock::now() - start).count();
    rep.tokens_per_s = static_cast<double>(count) * training.microbatch_size * model.seq_len / secs;
    on_iteration(rep);
  }
  return true;
}

} // namespace gwtf::model
