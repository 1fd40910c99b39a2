// Internal to model/: a run of model parts that is differentiated as one unit. Both the
// pipeline stage and the unpartitioned reference are made of segments, so they share the
// stash, the exactly-once accumulation and the gradient arithmetic.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <variant>
#include <vector>

#include <torch/csrc/autograd/autograd.h>
#include <torch/types.h>

#include "model/exact_sums.hpp"
#include "model/share_codec.hpp"
#include "model/transformer.hpp"

namespace gwtf::model::detail {

/// A differentiable run of parts with a stash per in-flight microbatch.
class segment {
public:
  using forward_fn = std::function<torch::Tensor(const torch::Tensor&)>;

  segment(std::vector<named_parameter> params, forward_fn fn)
    : params_(std::move(params)), fn_(std::move(fn)) {}

  /// Runs forward and keeps input and output until backward or drop. A second forward of
  /// the same microbatch (re-routed after a crash) replaces the first. Rematerialising, it
  /// runs without autograd and keeps the input only: backward recomputes the forward.
  torch::Tensor forward(std::uint64_t mb, const torch::Tensor& input, bool input_needs_grad) {
    auto in = input_needs_grad ? input.detach().requires_grad_(true) : input;
    if (rematerialize_) {
      torch::NoGradGuard no_grad;
      auto out = fn_(in);
      stash_[mb] = entry{in, torch::Tensor{}, generation_};
      return out;
    }
    auto out = fn_(in);
    stash_[mb] = entry{in, out, generation_};
    return out.detach();
  }

  /// Keep only inputs from forward to backward and recompute (true), or every activation.
  void set_rematerialize(bool on) { rematerialize_ = on; }
  /// Where the running gradient sums live: `alloc` returns a copy of its argument there (a
  /// swapped stage's file, model/block_store.hpp); unset, the first gradient itself.
  void set_sum_allocator(std::function<torch::Tensor(const torch::Tensor&)> alloc) { alloc_ = std::move(alloc); }
  /// Visits every running gradient sum held (a swapped stage releases their pages).
  template <class F>
  void each_sum(F&& f) const {
    for (auto& [key, part] : running_)
      for (auto& t : part)
        f(t);
  }
  /// How the microbatches' gradients add up (training.reproducible_sums): as they come (the
  /// default), in key order, or exactly on the grid of model/exact_sums.hpp (int64 sums). Set
  /// before the first microbatch.
  void set_sum_order(sum_order order) { order_ = order; }

  /// Backward from the stashed output; returns the input gradient (undefined when the
  /// input needs none), or an error when nothing is stashed for `mb`.
  std::variant<torch::Tensor, std::string> backward(std::uint64_t mb, const torch::Tensor& grad_output,
                                                    bool input_needs_grad) {
    auto it = stash_.find(mb);
    if (it == stash_.end())
      return "no stashed forward for microbatch " + std::to_string(mb);
    auto inputs = tensors();
    if (input_needs_grad)
      inputs.push_back(it->second.input);
    auto output = it->second.output.defined() && it->second.generation == generation_ ? it->second.output
                                                                                      : fn_(it->second.input);
    auto grads = torch::autograd::grad({output}, inputs, {grad_output});
    stash_.erase(it);
    torch::Tensor input_grad;
    if (input_needs_grad) {
      input_grad = grads.back();
      grads.pop_back();
    }
    accumulate(mb, std::move(grads));
    return input_grad;
  }

  /// Forward and backward of a scalar loss at once (the exit segment, the reference).
  /// Returns the loss and the input gradient (undefined when the input needs none).
  std::pair<double, torch::Tensor> loss_backward(std::uint64_t mb, const torch::Tensor& input,
                                                 const torch::Tensor& targets, bool input_needs_grad) {
    auto in = input_needs_grad ? input.detach().requires_grad_(true) : input;
    auto loss = lm_loss(fn_(in), targets);
    auto inputs = tensors();
    if (input_needs_grad)
      inputs.push_back(in);
    auto grads = torch::autograd::grad({loss}, inputs);
    torch::Tensor input_grad;
    if (input_needs_grad) {
      input_grad = grads.back();
      grads.pop_back();
    }
    accumulate(mb, std::move(grads));
    return {loss.item<double>(), input_grad};
  }

  /// Frees the stash of `mb`; true when there was one.
  bool drop(std::uint64_t mb) { return stash_.erase(mb) > 0; }

  /// The output of `input` without autograd, kept nowhere (SWARM's forward calls).
  torch::Tensor evaluate(const torch::Tensor& input) const {
    torch::NoGradGuard no_grad;
    return fn_(input);
  }

  /// Keeps only the input of `mb`, as a rematerialising forward does without computing it:
  /// the backward computes the forward once, with autograd (SWARM's backward calls).
  void keep_input(std::uint64_t mb, const torch::Tensor& input, bool input_needs_grad) {
    stash_[mb] = entry{input_needs_grad ? input.detach().requires_grad_(true) : input, torch::Tensor{}, generation_};
  }

  std::size_t stashed() const { return stash_.size(); }
  bool counted(std::uint64_t mb) const { return counted_.count(mb) > 0; }
  /// How many times the parameter gradients of `mb` were added to the sums this iteration:
  /// counted at the addition itself, so a second addition shows (the exactly-once check
  /// reports it), whatever `counted` says.
  std::uint32_t additions(std::uint64_t mb) const {
    auto it = additions_.find(mb);
    return it == additions_.end() ? 0 : it->second;
  }
  /// Fault injection for the exactly-once check (faults.script action double_count): the
  /// next microbatch counted is added twice.
  void add_next_twice() { add_twice_ = true; }
  /// Microbatches counted (of every iteration still held).
  std::size_t count() const { return counted_.size(); }
  /// Microbatches of `iteration` counted.
  std::size_t count(std::uint64_t iteration) const {
    std::size_t n = 0;
    for (auto mb : counted_)
      n += iteration_of(mb) == iteration ? 1 : 0;
    return n;
  }
  std::int64_t duplicates() const { return duplicates_; }

  /// The data holder of a microbatch key (`microbatch_id::key`).
  static std::uint32_t holder_of(std::uint64_t mb) { return static_cast<std::uint32_t>(mb >> 12) & 0xfffu; }
  /// The iteration of a microbatch key (`microbatch_id::key`).
  static std::uint64_t iteration_of(std::uint64_t mb) { return mb >> 24; }

  /// Microbatches counted per iteration.
  std::map<std::uint64_t, std::int64_t> iteration_counts() const {
    std::map<std::uint64_t, std::int64_t> out;
    for (auto mb : counted_)
      ++out[iteration_of(mb)];
    return out;
  }

  /// Microbatches of `iteration` counted per data holder (holder index order).
  std::map<std::uint32_t, std::int64_t> holder_counts(std::uint64_t iteration) const {
    std::map<std::uint32_t, std::int64_t> out;
    for (auto mb : counted_)
      if (iteration_of(mb) == iteration)
        ++out[holder_of(mb)];
    return out;
  }

  /// Gradient sums of `iteration` over the microbatches of the holders `keep` accepts;
  /// empty when none counted. The additions follow the microbatch keys, never their arrival:
  /// per holder its microbatches in key order, then the holders in index order. The same
  /// microbatches give the same bits however the network ordered them (docs/model.md,
  /// "Reproducible sums"). Iterations add apart: with training.averaging overlap the next
  /// iteration accumulates while this one is averaged.
  template <class Keep>
  std::vector<torch::Tensor> sums(std::uint64_t iteration, Keep&& keep) const {
    if (order_ != sum_order::key_order)
      return arrival_sums(iteration, keep);
    std::vector<torch::Tensor> out, part;
    std::uint32_t holder = 0;
    auto close_part = [&] {
      if (part.empty())
        return;
      if (out.empty())
        out = std::move(part);
      else
        for (std::size_t i = 0; i < out.size(); ++i)
          out[i].add_(part[i]);
      part.clear();
    };
    for (auto it = contributions_.lower_bound(iteration << 24);
         it != contributions_.end() && iteration_of(it->first) == iteration; ++it) { // key order: holder-major
      auto& [mb, c] = *it;
      if (!keep(holder_of(mb)))
        continue;
      if (!part.empty() && holder_of(mb) != holder)
        close_part();
      holder = holder_of(mb);
      for (std::uint32_t t = 0; t < c.times; ++t) {
        if (part.empty()) {
          for (auto& g : c.grads)
            part.push_back(g.clone());
          continue;
        }
        for (std::size_t i = 0; i < part.size(); ++i)
          part[i].add_(c.grads[i]);
      }
    }
    close_part();
    return out;
  }
  std::vector<torch::Tensor> sums(std::uint64_t iteration) const {
    return sums(iteration, [](std::uint32_t) { return true; });
  }
  /// The sums of every iteration held, added iteration by iteration (one iteration: its sums).
  /// Out of place: a single holder's sums are the running sums themselves (arrival_sums).
  std::vector<torch::Tensor> sums() const {
    std::set<std::uint64_t> held;
    for (auto mb : counted_)
      held.insert(iteration_of(mb));
    std::vector<torch::Tensor> out;
    for (auto i : held) {
      auto one = sums(i);
      if (out.empty())
        out = std::move(one);
      else
        for (std::size_t k = 0; k < out.size() && k < one.size(); ++k)
          out[k] = out[k].add(one[k]);
    }
    return out;
  }
  /// Without key order: the running sums of `iteration` of the holders `keep` accepts, added
  /// in holder order; one holder's sums are returned as they are. Exact: int64, whatever the
  /// order.
  template <class Keep>
  std::vector<torch::Tensor> arrival_sums(std::uint64_t iteration, Keep&& keep) const {
    std::vector<torch::Tensor> out;
    bool owned = false;
    for (auto it = running_.lower_bound({iteration, 0}); it != running_.end() && it->first.first == iteration; ++it) {
      auto& part = it->second;
      if (!keep(it->first.second))
        continue;
      if (out.empty()) {
        out = part;
        continue;
      }
      if (!owned) {
        for (auto& t : out)
          t = t.clone();
        owned = true;
      }
      for (std::size_t i = 0; i < out.size(); ++i)
        out[i].add_(part[i]);
    }
    return out;
  }
  const std::vector<named_parameter>& parameters() const { return params_; }

  /// Forgets every counted microbatch and gradient sum.
  void reset() {
    counted_.clear();
    additions_.clear();
    contributions_.clear();
    running_.clear();
  }
  /// Forgets the counted microbatches and gradient sums of `iteration` and older (their step
  /// was taken); a later iteration's stay.
  void reset_through(std::uint64_t iteration) {
    auto old = [&](std::uint64_t mb) { return iteration_of(mb) <= iteration; };
    for (auto it = counted_.begin(); it != counted_.end();)
      it = old(*it) ? counted_.erase(it) : std::next(it);
    for (auto it = additions_.begin(); it != additions_.end();)
      it = old(it->first) ? additions_.erase(it) : std::next(it);
    contributions_.erase(contributions_.begin(), contributions_.lower_bound((iteration + 1) << 24));
    running_.erase(running_.begin(), running_.lower_bound({iteration + 1, 0}));
  }
  /// The weights changed (a step or a loaded state): a stashed forward computed with the old
  /// ones is computed again from its input at its backward, never differentiated through
  /// weights that are no longer the ones it ran with.
  void new_weights() { ++generation_; }

  /// Forgets everything computed with the weights before an imported state: gradient sums,
  /// counted microbatches and the stashed forwards.
  void discard() {
    reset();
    stash_.clear();
  }

private:
  struct entry {
    torch::Tensor input;
    torch::Tensor output;
    std::uint64_t generation = 0; // of the weights its output was computed with
  };

  std::vector<torch::Tensor> tensors() const {
    std::vector<torch::Tensor> out;
    out.reserve(params_.size());
    for (auto& p : params_)
      out.push_back(p.tensor);
    return out;
  }

  // Exactly once: the parameter gradients of a microbatch count the first time only; a
  // recomputation (after a crash) still yields its input gradient for the stage before.
  // Each microbatch's gradients are kept apart until the sums are asked for, so that they add
  // in key order (reproducible whatever the arrival order) and a holder's microbatches can be
  // left out when the iteration's verdict does not count them (docs/runtime.md, "The end of
  // an iteration").
  void accumulate(std::uint64_t mb, std::vector<torch::Tensor> grads) {
    if (!counted_.insert(mb).second) {
      ++duplicates_;
      return;
    }
    std::uint32_t times = add_twice_ ? 2 : 1;
    add_twice_ = false;
    additions_[mb] += times;
    if (order_ == sum_order::exact)
      for (auto& g : grads)
        g = to_exact(g);
    if (order_ == sum_order::key_order) {
      contributions_[mb] = contribution{std::move(grads), times};
      return;
    }
    auto& sums = running_[{iteration_of(mb), holder_of(mb)}];
    for (std::uint32_t t = 0; t < times; ++t) {
      if (sums.empty()) {
        for (auto& g : grads)
          sums.push_back(alloc_ ? alloc_(g) : times > 1 ? g.clone() : g);
        continue;
      }
      for (std::size_t i = 0; i < sums.size(); ++i)
        sums[i].add_(grads[i]);
    }
  }

  std::vector<named_parameter> params_;
  forward_fn fn_;
  std::function<torch::Tensor(const torch::Tensor&)> alloc_; // set_sum_allocator
  std::unordered_map<std::uint64_t, entry> stash_;
  std::unordered_set<std::uint64_t> counted_;
  std::unordered_map<std::uint64_t, std::uint32_t> additions_; // per microbatch, at the addition
  bool add_twice_ = false;
  struct contribution {
    std::vector<torch::Tensor> grads; // one microbatch's parameter gradients
    std::uint32_t times = 1;          // additions (2: the double_count seam)
  };
  std::map<std::uint64_t, contribution> contributions_; // by microbatch key (key order)
  std::map<std::pair<std::uint64_t, std::uint32_t>, std::vector<torch::Tensor>> running_; // per (iteration, data holder) (arrival order; exact: int64)
  sum_order order_ = sum_order::off;
  std::int64_t duplicates_ = 0;
  bool rematerialize_ = false;
  std::uint64_t generation_ = 0; // +1 per change of the weights (new_weights)
};

} // namespace gwtf::model::detail
