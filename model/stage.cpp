#include "model/stage.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <list>
#include <optional>
#include <stdexcept>

#include "model/block_store.hpp"
#include "model/exact_sums.hpp"
#include "model/optimizer.hpp"
#include "model/sizing.hpp"
#include "model/segment.hpp"

namespace gwtf::model {

namespace {

constexpr char state_magic[8] = {'G', 'W', 'T', 'F', 'S', 'T', 'G', 'E'};
// 2: the 4-lane fast_hash instead of byte-wise FNV-1a; 3: a pending step after the
// parameters (training.averaging overlap). Version 2 blobs still load (no pending step).
constexpr std::uint32_t state_version = 3;

std::vector<named_parameter> concat(const std::vector<const std::vector<named_parameter>*>& lists) {
  std::vector<named_parameter> out;
  for (auto* l : lists)
    out.insert(out.end(), l->begin(), l->end());
  return out;
}

// Little-endian byte writer/reader for the state blob.
struct writer {
  std::vector<std::uint8_t> out;
  void bytes(const void* p, std::size_t n) {
    auto* b = static_cast<const std::uint8_t*>(p);
    out.insert(out.end(), b, b + n);
  }
  template <class T>
  void put(T v) {
    bytes(&v, sizeof v);
  }
  void tensor(const torch::Tensor& t) {
    auto c = t.detach().contiguous();
    bytes(c.data_ptr<float>(), static_cast<std::size_t>(c.numel()) * sizeof(float));
  }
};

struct reader {
  const std::uint8_t* p;
  std::size_t left;
  bool take(void* dst, std::size_t n) {
    if (n > left)
      return false;
    std::memcpy(dst, p, n);
    p += n;
    left -= n;
    return true;
  }
  template <class T>
  bool get(T& v) {
    return take(&v, sizeof v);
  }
  const std::uint8_t* skip(std::size_t n) {
    if (n > left)
      return nullptr;
    auto* at = p;
    p += n;
    left -= n;
    return at;
  }
};

} // namespace

std::vector<torch::Tensor> average(const std::vector<gradient_sum>& replicas) {
  std::vector<torch::Tensor> out;
  std::int64_t count = 0;
  bool exact = false;
  for (auto& r : replicas) {
    if (r.count == 0)
      continue;
    count += r.count;
    if (out.empty()) {
      exact = !r.sums.empty() && is_exact(r.sums.front());
      for (auto& s : r.sums)
        out.push_back(s.clone());
    } else {
      for (std::size_t i = 0; i < out.size(); ++i)
        out[i].add_(r.sums[i]);
    }
  }
  for (auto& t : out)
    t = exact ? exact_average(t, count) : t.div_(static_cast<double>(count));
  return out;
}

// Layer swapping: the blocks' weights, moments and gradient sums live in a block_store; at
// most `pool` blocks stay resident, the least recently used one released when another comes.
struct swap_plan {
  std::shared_ptr<block_store> store;
  std::size_t pool = 1;
  std::list<std::size_t> resident;                 // most recently used first
  std::vector<std::vector<torch::Tensor>> weights; // per block
  std::vector<std::vector<torch::Tensor>> moments; // per block: AdamW's first and second
  std::vector<std::size_t> block_of;               // parameter index -> block
};

struct stage::impl {
  model_config model;
  training_config training;
  stage_span span;
  std::optional<entry_part> entry;
  std::vector<block_part> blocks;
  std::optional<exit_part> exit;
  std::vector<detail::segment> segments; // relay: [blocks] (swapped: one per block); stage 0: [entry, exit]
  std::optional<adamw> optimizer;
  mutable std::optional<swap_plan> swap; // set when the stage swaps its blocks

  impl(const model_config& m, const training_config& t, int index, const swap_options& swap_opts)
    : model(m), training(t), span(partition(m).at(static_cast<std::size_t>(index))) {
    if (span.entry) {
      entry.emplace(model);
      exit.emplace(model);
      init_parameters(entry->parameters(), training.seed, model.layers);
      init_parameters(exit->parameters(), training.seed, model.layers);
      segments.emplace_back(entry->parameters(), [this](const torch::Tensor& x) { return entry->forward(x); });
      segments.emplace_back(exit->parameters(), [this](const torch::Tensor& x) { return exit->forward(x); });
    } else {
      auto plan = plan_budget(model, span, training.microbatch_size, swap_opts.capacity,
                            static_cast<double>(swap_opts.budget_bytes), false);
      if (plan.swapped) {
        swap_in_file(swap_opts, plan.pool);
        return;
      }
      std::vector<named_parameter> params;
      for (int l = span.first_layer; l < span.end_layer; ++l) {
        blocks.emplace_back(model, l);
        init_parameters(blocks.back().parameters(), training.seed, model.layers);
        params.insert(params.end(), blocks.back().parameters().begin(), blocks.back().parameters().end());
      }
      segments.emplace_back(std::move(params), [this](const torch::Tensor& x) {
        auto y = x;
        for (auto& b : blocks)
          y = b.forward(y);
        return y;
      });
    }
    optimizer.emplace(all_parameters(), training);
  }

  // Builds the blocks one at a time straight into a swap file (weights, then the optimizer's
  // moments there too) and makes the gradient sums grow there; one segment per block, each
  // rematerialising: a backward recomputes one block's forward from its input, so only that
  // block's activations and gradients are out. A pool of `pool` blocks (model::plan_budget:
  // what the budget leaves after the inputs stashed for its capacity) stays resident.
  void swap_in_file(const swap_options& opts, int pool) {
    if (training.reproducible_sums == sum_order::key_order)
      throw std::runtime_error("stage " + std::to_string(span.stage)
                               + ": training.reproducible_sums key_order keeps a gradient copy per microbatch in "
                                 "memory: a swapped stage needs off or exact");
    auto& plan = swap.emplace();
    plan.store = std::make_shared<block_store>(opts.dir);
    auto n = static_cast<std::size_t>(span.end_layer - span.first_layer);
    plan.pool = static_cast<std::size_t>(pool);
    plan.weights.resize(n);
    plan.moments.resize(n);
    blocks.reserve(n);
    for (std::size_t k = 0; k < n; ++k) {
      blocks.emplace_back(model, span.first_layer + static_cast<int>(k));
      init_parameters(blocks.back().parameters(), training.seed, model.layers);
      for (auto& p : blocks.back().parameters()) {
        p.tensor.set_data(plan.store->adopt(p.tensor));
        block_store::release(p.tensor);
        plan.weights[k].push_back(p.tensor);
        plan.block_of.push_back(k);
      }
      segments.emplace_back(blocks[k].parameters(), [this, k](const torch::Tensor& x) { return blocks[k].forward(x); });
      segments[k].set_rematerialize(true);
      segments[k].set_sum_allocator([store = plan.store](const torch::Tensor& g) { return store->adopt(g); });
    }
    optimizer.emplace(all_parameters(), training, [store = plan.store](const torch::Tensor& p) {
      return store->allocate(p.sizes(), p.scalar_type());
    });
    auto& m = optimizer->first_moments();
    auto& v = optimizer->second_moments();
    for (std::size_t i = 0; i < plan.block_of.size(); ++i)
      plan.moments[plan.block_of[i]].insert(plan.moments[plan.block_of[i]].end(), {m[i], v[i]});
    for (auto& block : plan.moments)
      for (auto& t : block)
        block_store::release(t);
  }

  // Every stored tensor of block k: weights, moments and the gradient sums held.
  template <class F>
  void each_stored(std::size_t k, F&& f) const {
    for (auto& t : swap->weights[k])
      f(t);
    for (auto& t : swap->moments[k])
      f(t);
    segments[k].each_sum(f);
  }
  // Block k is about to compute: its weights mapped in at once (and its sums writable for a
  // backward, its moments and weights writable for a step), not a page fault at a time.
  enum class use { forward, backward, step };
  void bring(std::size_t k, use u) const {
    if (!swap)
      return;
    for (auto& t : swap->weights[k])
      block_store::populate(t, u == use::step);
    if (u == use::backward)
      segments[k].each_sum([](const torch::Tensor& t) { block_store::populate(t, true); });
    if (u == use::step)
      for (auto& t : swap->moments[k])
        block_store::populate(t, true);
  }
  void prefetch(std::size_t k) const {
    if (swap && k < segments.size())
      each_stored(k, [](const torch::Tensor& t) { block_store::prefetch(t); });
  }
  // Block k is in use: the most recent; the least recent beyond the pool is released.
  void touch(std::size_t k) const {
    if (!swap)
      return;
    auto& r = swap->resident;
    r.remove(k);
    r.push_front(k);
    while (r.size() > swap->pool) {
      each_stored(r.back(), [](const torch::Tensor& t) { block_store::release(t); });
      r.pop_back();
    }
  }
  // After a pass over every block (a state export or import, the weights' hash): the blocks
  // outside the pool are released.
  void trim() const {
    if (!swap)
      return;
    for (std::size_t k = 0; k < segments.size(); ++k)
      if (std::find(swap->resident.begin(), swap->resident.end(), k) == swap->resident.end())
        each_stored(k, [](const torch::Tensor& t) { block_store::release(t); });
  }

  torch::Tensor swapped_forward(std::uint64_t mb, const torch::Tensor& input) {
    auto y = input;
    for (std::size_t k = 0; k < segments.size(); ++k) {
      prefetch(k + 1); // read ahead while block k computes
      bring(k, use::forward);
      y = segments[k].forward(mb, y, true);
      touch(k);
    }
    return y;
  }

  outcome<torch::Tensor> swapped_backward(std::uint64_t mb, const torch::Tensor& grad_output) {
    auto g = grad_output;
    for (std::size_t k = segments.size(); k-- > 0;) {
      if (k > 0)
        prefetch(k - 1);
      bring(k, use::backward);
      auto r = segments[k].backward(mb, g, true);
      if (auto* e = std::get_if<std::string>(&r))
        return *e;
      g = std::get<torch::Tensor>(r);
      touch(k);
    }
    return g;
  }

  torch::Tensor swapped_evaluate(const torch::Tensor& input) const {
    auto y = input;
    for (std::size_t k = 0; k < segments.size(); ++k) {
      prefetch(k + 1);
      bring(k, use::forward);
      y = segments[k].evaluate(y);
      touch(k);
    }
    return y;
  }

  std::vector<named_parameter> all_parameters() const {
    std::vector<const std::vector<named_parameter>*> lists;
    for (auto& s : segments)
      lists.push_back(&s.parameters());
    return concat(lists);
  }

  std::optional<std::string> require(bool relay) const {
    if (relay && span.entry)
      return std::string{"stage 0 has no blocks: use embed/head/embed_backward"};
    if (!relay && !span.entry)
      return "stage " + std::to_string(span.stage) + " is a relay stage: use forward/backward";
    return std::nullopt;
  }
};

stage::stage(const model_config& model, const training_config& training, int index, bool rematerialize,
             const swap_options& swap)
  : impl_(std::make_unique<impl>(model, training, index, swap)) {
  if (index > 0 && !impl_->swap) // relays (swapped: every block rematerialises); stage 0's entry keeps its (small) stash
    impl_->segments[0].set_rematerialize(rematerialize);
  for (auto& s : impl_->segments)
    s.set_sum_order(training.reproducible_sums);
}
stage::~stage() = default;
stage::stage(stage&&) noexcept = default;
stage& stage::operator=(stage&&) noexcept = default;

const stage_span& stage::span() const {
  return impl_->span;
}

std::vector<named_parameter> stage::parameters() const {
  return impl_->all_parameters();
}

outcome<torch::Tensor> stage::forward(std::uint64_t mb, const torch::Tensor& input) {
  if (auto e = impl_->require(true))
    return *e;
  if (impl_->swap)
    return impl_->swapped_forward(mb, input);
  return impl_->segments[0].forward(mb, input, true);
}

outcome<torch::Tensor> stage::backward(std::uint64_t mb, const torch::Tensor& grad_output) {
  if (auto e = impl_->require(true))
    return *e;
  if (impl_->swap)
    return impl_->swapped_backward(mb, grad_output);
  return impl_->segments[0].backward(mb, grad_output, true);
}

outcome<torch::Tensor> stage::forward_only(const torch::Tensor& input) const {
  if (auto e = impl_->require(true))
    return *e;
  if (impl_->swap)
    return impl_->swapped_evaluate(input);
  return impl_->segments[0].evaluate(input);
}

outcome<torch::Tensor> stage::recompute_backward(std::uint64_t mb, const torch::Tensor& input,
                                                 const torch::Tensor& grad_output) {
  if (auto e = impl_->require(true))
    return *e;
  if (impl_->swap) { // each block's input, then the backward block by block
    impl_->swapped_forward(mb, input);
    return impl_->swapped_backward(mb, grad_output);
  }
  impl_->segments[0].keep_input(mb, input, true);
  return impl_->segments[0].backward(mb, grad_output, true);
}

outcome<torch::Tensor> stage::embed(std::uint64_t mb, const torch::Tensor& tokens) {
  if (auto e = impl_->require(false))
    return *e;
  return impl_->segments[0].forward(mb, tokens, false);
}

outcome<head_result> stage::head(std::uint64_t mb, const torch::Tensor& activation,
                                 const torch::Tensor& targets) {
  if (auto e = impl_->require(false))
    return *e;
  auto [loss, grad] = impl_->segments[1].loss_backward(mb, activation, targets, true);
  return head_result{loss, grad};
}

outcome<bool> stage::embed_backward(std::uint64_t mb, const torch::Tensor& grad_output) {
  if (auto e = impl_->require(false))
    return *e;
  auto r = impl_->segments[0].backward(mb, grad_output, false);
  if (auto* err = std::get_if<std::string>(&r))
    return *err;
  return true;
}

bool stage::drop(std::uint64_t mb) {
  bool any = false;
  for (auto& s : impl_->segments)
    any = s.drop(mb) || any;
  return any;
}

std::size_t stage::stashed() const {
  return impl_->segments[0].stashed();
}

bool stage::counted(std::uint64_t mb) const {
  for (auto& s : impl_->segments)
    if (!s.counted(mb))
      return false;
  return true;
}

std::uint32_t stage::additions(std::uint64_t mb) const {
  std::uint32_t most = 0;
  for (auto& s : impl_->segments)
    most = std::max(most, s.additions(mb));
  return most;
}

void stage::add_next_twice() {
  impl_->segments.back().add_next_twice(); // one microbatch doubled (the head's, at stage 0)
}

std::int64_t stage::duplicates() const {
  if (impl_->swap) // one segment per block: a duplicate is discarded by each
    return impl_->segments.back().duplicates();
  std::int64_t n = 0;
  for (auto& s : impl_->segments)
    n += s.duplicates();
  return n;
}

namespace {

// The sums of one iteration (or of every one held: nullopt) over the holders `keep` accepts.
template <class Keep>
outcome<gradient_sum> gradients_of(const std::vector<detail::segment>& segs, int stage_index,
                                   std::optional<std::uint64_t> iteration, Keep&& keep) {
  auto count = [&](const detail::segment& s) { return iteration ? s.count(*iteration) : s.count(); };
  for (auto& s : segs)
    if (count(s) != count(segs[0]))
      return "stage " + std::to_string(stage_index) + ": " + std::to_string(count(segs.back()))
             + " microbatch(es) passed the head but " + std::to_string(count(segs[0]))
             + " the embedding backward";
  gradient_sum out;
  std::set<std::uint64_t> held;
  if (iteration)
    held.insert(*iteration);
  else
    for (auto& [i, n] : segs[0].iteration_counts())
      held.insert(i);
  for (auto i : held)
    for (auto& [h, n] : segs[0].holder_counts(i))
      if (keep(h)) {
        out.holders[h] += n;
        out.count += n;
      }
  if (out.count == 0)
    return out;
  for (auto& s : segs) {
    std::vector<torch::Tensor> sums;
    for (auto i : held) {
      auto one = s.sums(i, keep);
      if (sums.empty())
        sums = std::move(one);
      else
        for (std::size_t k = 0; k < sums.size() && k < one.size(); ++k)
          sums[k] = sums[k].add(one[k]);
    }
    for (auto& t : sums)
      out.sums.push_back(t);
  }
  return out;
}

} // namespace

outcome<gradient_sum> stage::gradients(std::uint64_t iteration) const {
  return gradients_of(impl_->segments, impl_->span.stage, iteration, [](std::uint32_t) { return true; });
}

outcome<gradient_sum> stage::gradients(std::uint64_t iteration, const std::set<std::uint32_t>& holders) const {
  return gradients_of(impl_->segments, impl_->span.stage, iteration,
                      [&](std::uint32_t h) { return holders.count(h) > 0; });
}

outcome<gradient_sum> stage::gradients() const {
  return gradients_of(impl_->segments, impl_->span.stage, std::nullopt, [](std::uint32_t) { return true; });
}

double stage::squared_norm(const std::vector<torch::Tensor>& averaged) {
  return model::squared_norm(averaged);
}

outcome<bool> stage::apply(const std::vector<torch::Tensor>& averaged, std::int64_t iteration,
                           double global_norm) {
  auto params = impl_->all_parameters();
  if (averaged.size() != params.size())
    return "apply: " + std::to_string(averaged.size()) + " gradients for "
           + std::to_string(params.size()) + " parameters";
  for (std::size_t i = 0; i < params.size(); ++i)
    if (!averaged[i].sizes().equals(params[i].tensor.sizes()))
      return "apply: gradient of " + params[i].name + " has the wrong shape";
  std::function<void(std::size_t)> before;
  if (impl_->swap) // block by block: the next one read ahead while this one steps
    before = [this, at = std::size_t{0}, first = true](std::size_t i) mutable {
      auto k = impl_->swap->block_of.at(i);
      if (!first && k == at)
        return;
      first = false;
      at = k;
      impl_->prefetch(k + 1);
      impl_->bring(k, impl::use::step);
      impl_->touch(k);
    };
  impl_->optimizer->step(averaged, learning_rate(impl_->training, iteration),
                         clip_coefficient(global_norm, impl_->training.grad_clip), before);
  for (auto& s : impl_->segments) {
    s.reset_through(static_cast<std::uint64_t>(iteration));
    s.new_weights();
  }
  return true;
}

std::vector<std::uint8_t> stage::export_state(const pending_update* pending) const {
  writer w;
  w.bytes(state_magic, sizeof state_magic);
  w.put<std::uint32_t>(state_version);
  w.put<std::uint32_t>(static_cast<std::uint32_t>(impl_->span.stage));
  w.put<std::int64_t>(impl_->optimizer->steps());
  auto params = impl_->all_parameters();
  w.put<std::uint32_t>(static_cast<std::uint32_t>(params.size()));
  for (std::size_t i = 0; i < params.size(); ++i) {
    auto& p = params[i];
    w.put<std::uint16_t>(static_cast<std::uint16_t>(p.name.size()));
    w.bytes(p.name.data(), p.name.size());
    w.put<std::uint8_t>(static_cast<std::uint8_t>(p.tensor.dim()));
    for (auto d : p.tensor.sizes())
      w.put<std::int64_t>(d);
    w.tensor(p.tensor);
    w.tensor(impl_->optimizer->first_moments()[i]);
    w.tensor(impl_->optimizer->second_moments()[i]);
  }
  // Version 3's tail: the pending step's tensors, iteration and norm, then a flag byte (1),
  // or the flag alone (0); the flag lies just before the hash, so model/checkpoint reads it.
  bool with = pending != nullptr && pending->averaged.size() == params.size();
  if (with) {
    for (auto& t : pending->averaged)
      w.tensor(t.to(torch::kFloat));
    w.put<std::int64_t>(pending->iteration);
    w.put<double>(pending->global_norm);
  }
  w.put<std::uint8_t>(with ? 1 : 0);
  w.put<std::uint64_t>(fast_hash(w.out.data(), w.out.size()));
  impl_->trim();
  return std::move(w.out);
}

outcome<bool> stage::import_state(const std::uint8_t* data, std::size_t size, std::optional<pending_update>* pending) {
  constexpr std::size_t header = sizeof state_magic + 4 + 4 + 8 + 4;
  if (data == nullptr || size < header + 8)
    return "state blob: " + std::to_string(size) + " bytes is shorter than its header";
  if (std::memcmp(data, state_magic, sizeof state_magic) != 0)
    return std::string{"state blob: bad magic (not a caf-gwtf stage state)"};
  std::uint64_t stored = 0;
  std::memcpy(&stored, data + size - 8, 8);
  if (fast_hash(data, size - 8) != stored)
    return std::string{"state blob: content hash mismatch (truncated or corrupted)"};
  reader r{data + sizeof state_magic, size - 8 - sizeof state_magic};
  std::uint32_t version = 0;
  std::uint32_t index = 0;
  std::int64_t steps = 0;
  std::uint32_t count = 0;
  r.get(version);
  r.get(index);
  r.get(steps);
  r.get(count);
  if (version != state_version && version != 2)
    return "state blob: version " + std::to_string(version) + ", this build reads 2 and "
           + std::to_string(state_version);
  if (index != static_cast<std::uint32_t>(impl_->span.stage))
    return "state blob: holds stage " + std::to_string(index) + ", this is stage "
           + std::to_string(impl_->span.stage);
  auto params = impl_->all_parameters();
  if (count != params.size())
    return "state blob: " + std::to_string(count) + " parameters, stage has "
           + std::to_string(params.size());
  if (steps < 0)
    return std::string{"state blob: negative optimizer step count"};
  // Validate everything first; copy only when the whole blob is good.
  std::vector<const std::uint8_t*> sources; // weights, m, v per parameter
  for (auto& p : params) {
    std::uint16_t len = 0;
    if (!r.get(len))
      return "state blob: truncated before parameter " + p.name;
    std::string name(len, '\0');
    if (!r.take(name.data(), len) || name != p.name)
      return "state blob: expected parameter " + p.name + ", found '" + name + "'";
    std::uint8_t ndim = 0;
    if (!r.get(ndim) || ndim != p.tensor.dim())
      return "state blob: " + p.name + " has the wrong number of dimensions";
    for (auto d : p.tensor.sizes()) {
      std::int64_t got = 0;
      if (!r.get(got) || got != d)
        return "state blob: " + p.name + " has the wrong shape";
    }
    std::size_t n = static_cast<std::size_t>(p.tensor.numel()) * sizeof(float);
    for (int k = 0; k < 3; ++k) {
      auto* src = r.skip(n);
      if (src == nullptr)
        return "state blob: truncated inside " + p.name;
      sources.push_back(src);
    }
  }
  bool has_pending = false;
  std::int64_t pending_iteration = 0;
  double pending_norm = 0;
  std::vector<const std::uint8_t*> pending_sources;
  if (version >= 3) {
    has_pending = r.left > 1;
    if (has_pending) {
      for (auto& p : params) {
        auto* src = r.skip(static_cast<std::size_t>(p.tensor.numel()) * sizeof(float));
        if (src == nullptr)
          return "state blob: truncated inside the pending step of " + p.name;
        pending_sources.push_back(src);
      }
      if (!r.get(pending_iteration) || !r.get(pending_norm))
        return std::string{"state blob: truncated inside its pending step"};
      if (pending_iteration != steps)
        return "state blob: its pending step is of iteration " + std::to_string(pending_iteration) + ", not "
               + std::to_string(steps) + " (its next step)";
      if (!std::isfinite(pending_norm) || pending_norm < 0)
        return std::string{"state blob: its pending step's norm is not a finite non-negative number"};
    }
    std::uint8_t flag = 0;
    if (!r.get(flag) || flag != (has_pending ? 1 : 0))
      return std::string{"state blob: bad pending-step flag"};
  }
  if (r.left != 0)
    return "state blob: " + std::to_string(r.left) + " unexpected trailing bytes";
  torch::NoGradGuard no_grad;
  auto& m = impl_->optimizer->first_moments();
  auto& v = impl_->optimizer->second_moments();
  for (std::size_t i = 0; i < params.size(); ++i) {
    std::size_t n = static_cast<std::size_t>(params[i].tensor.numel()) * sizeof(float);
    std::memcpy(params[i].tensor.data_ptr<float>(), sources[3 * i], n);
    std::memcpy(m[i].data_ptr<float>(), sources[3 * i + 1], n);
    std::memcpy(v[i].data_ptr<float>(), sources[3 * i + 2], n);
  }
  impl_->optimizer->set_steps(steps);
  impl_->trim();
  // Gradients and stashes computed with the replaced weights belong to another iteration
  // or to weights the peers do not have: none may reach a share of the imported state.
  for (auto& s : impl_->segments) {
    s.discard();
    s.new_weights();
  }
  if (pending) {
    pending->reset();
    if (has_pending) {
      pending_update p;
      p.iteration = pending_iteration;
      p.global_norm = pending_norm;
      for (std::size_t i = 0; i < params.size(); ++i) {
        auto t = torch::empty_like(params[i].tensor);
        std::memcpy(t.data_ptr<float>(), pending_sources[i],
                    static_cast<std::size_t>(params[i].tensor.numel()) * sizeof(float));
        p.averaged.push_back(std::move(t));
      }
      *pending = std::move(p);
    }
  }
  return true;
}

std::int64_t stage::steps() const { return impl_->optimizer->steps(); }

std::uint64_t stage::weights_hash() const {
  std::uint64_t h = 1469598103934665603ULL;
  for (auto& p : impl_->all_parameters()) {
    auto c = p.tensor.detach().contiguous();
    h = fast_hash(static_cast<const std::uint8_t*>(c.data_ptr()),
              static_cast<std::size_t>(c.numel()) * sizeof(float), h);
  }
  impl_->trim();
  return h;
}

int stage::resident_blocks() const {
  return impl_->swap ? static_cast<int>(impl_->swap->pool) : 0;
}

std::int64_t stage::state_bytes() const {
  std::int64_t n = 0;
  for (auto& p : impl_->all_parameters())
    n += p.tensor.numel() * state_bytes_per_parameter;
  return n;
}

} // namespace gwtf::model
