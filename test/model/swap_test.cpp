// Layer swapping (model/block_store.hpp, docs/model.md "Layer swapping"): a relay stage over
// a memory budget computes bit for bit what the in-memory stage does, and its resident set
// grows by no more than the budget plus one block's state.
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "model/block_store.hpp"
#include "model/stage.hpp"
#include "resident_set.hpp"

#include <doctest/doctest.h> // after torch headers: glog redefines CHECK (toolchain.md)

using namespace gwtf::model;
using gwtf::test::reset_peak;
using gwtf::test::status_bytes;

namespace {

template <class T>
T ok(outcome<T> r) {
  REQUIRE_MESSAGE(std::holds_alternative<T>(r), std::get<std::string>(r));
  return std::get<T>(r);
}

std::uint64_t key(std::uint64_t iteration, std::uint32_t holder, std::uint32_t index) {
  return iteration << 24 | static_cast<std::uint64_t>(holder) << 12 | index;
}

std::string tmp() {
  return std::filesystem::temp_directory_path().string();
}

} // namespace

TEST_CASE("layer swapping: a relay through half its state computes bit for bit what the in-memory relay does over 10 steps") {
  for (auto arch : {architecture::gpt, architecture::llama}) {
    INFO((arch == architecture::gpt ? "gpt" : "llama"));
    model_config m;
    m.arch = arch;
    m.layers = 6;
    m.hidden = 32;
    m.heads = 4;
    m.seq_len = 16;
    m.vocab = 256;
    m.stages = 2; // stage 1 holds the six blocks
    training_config t;
    t.seed = 11;
    t.iterations = 10;
    t.microbatch_size = 2;
    t.warmup_iterations = 2;
    t.grad_clip = 0.5;
    stage memory{m, t, 1};
    // Half the state: three blocks' worth, less one microbatch's stash: two stay resident.
    stage swapped{m, t, 1, false, swap_options{memory.state_bytes() / 2, tmp()}};
    CHECK(memory.resident_blocks() == 0);
    CHECK(swapped.resident_blocks() == 2);
    CHECK(swapped.weights_hash() == memory.weights_hash());
    torch::manual_seed(3);
    for (std::uint64_t it = 0; it < 10; ++it) {
      // Three microbatches of two holders in flight; backward in another order.
      std::vector<std::uint64_t> keys{key(it, 0, 0), key(it, 1, 0), key(it, 0, 1)};
      std::vector<torch::Tensor> grads;
      for (auto k : keys) {
        auto in = torch::randn({t.microbatch_size, m.seq_len, m.hidden});
        CHECK(torch::equal(ok(memory.forward(k, in)), ok(swapped.forward(k, in))));
        grads.push_back(torch::randn({t.microbatch_size, m.seq_len, m.hidden}));
      }
      for (int j : {1, 2, 0})
        CHECK(torch::equal(ok(memory.backward(keys[j], grads[j])), ok(swapped.backward(keys[j], grads[j]))));
      // A recomputed microbatch yields its input gradient and counts once.
      auto in = torch::randn({t.microbatch_size, m.seq_len, m.hidden});
      ok(memory.forward(keys[0], in));
      ok(swapped.forward(keys[0], in));
      CHECK(torch::equal(ok(memory.backward(keys[0], grads[0])), ok(swapped.backward(keys[0], grads[0]))));
      CHECK(swapped.duplicates() == memory.duplicates());
      CHECK(swapped.additions(keys[0]) == 1);
      auto a = ok(memory.gradients(it));
      auto b = ok(swapped.gradients(it));
      REQUIRE(a.count == 3);
      REQUIRE(b.count == 3);
      REQUIRE(a.sums.size() == b.sums.size());
      for (std::size_t i = 0; i < a.sums.size(); ++i)
        CHECK(torch::equal(a.sums[i], b.sums[i]));
      auto averaged = average({a});
      auto norm = std::sqrt(stage::squared_norm(averaged));
      ok(memory.apply(averaged, static_cast<std::int64_t>(it), norm));
      ok(swapped.apply(average({b}), static_cast<std::int64_t>(it), norm));
      REQUIRE(swapped.weights_hash() == memory.weights_hash());
    }
    CHECK(swapped.export_state() == memory.export_state());
    CHECK(swapped.duplicates() == 10);
    auto x = torch::randn({t.microbatch_size, m.seq_len, m.hidden});
    CHECK(torch::equal(ok(memory.forward_only(x)), ok(swapped.forward_only(x))));
    // A state imported into a swapped stage lands in its file: the same weights.
    stage fresh{m, t, 1, false, swap_options{memory.state_bytes() / 4, tmp()}};
    auto blob = memory.export_state();
    ok(fresh.import_state(blob.data(), blob.size()));
    CHECK(fresh.weights_hash() == memory.weights_hash());
    CHECK(fresh.steps() == 10);
  }
}

TEST_CASE("layer swapping: with a budget of a third of its state a relay's resident set grows by at most the budget plus one block's state") {
  model_config m;
  m.layers = 6;
  m.hidden = 256;
  m.heads = 4;
  m.seq_len = 64;
  m.vocab = 256;
  m.stages = 2;
  training_config t;
  t.seed = 5;
  t.iterations = 4;
  t.microbatch_size = 2;
  t.warmup_iterations = 1;
  auto budget = [&] {
    stage probe{m, t, 1};
    return probe.state_bytes() / 3;
  }();
  auto block_state = 3 * budget / m.layers; // the stage's state over its six blocks
  auto x = torch::randn({t.microbatch_size, m.seq_len, m.hidden});
  // The growth of the resident set over `run`, counted from the resident set at its start.
  auto growth = [](auto&& run) {
    auto before = status_bytes("VmRSS");
    reset_peak();
    run();
    return status_bytes("VmHWM") - before;
  };
  auto train = [&](stage& s, int microbatches) {
    for (int j = 0; j < microbatches; ++j)
      ok(s.forward(key(0, 0, static_cast<std::uint32_t>(j)), x));
    for (int j = 0; j < microbatches; ++j)
      ok(s.backward(key(0, 0, static_cast<std::uint32_t>(j)), x));
  };
  {
    // LibTorch's one-time costs (its thread pool, kernels' workspaces) come with the first
    // forward and backward in the process: paid here by a one-block stage of the same width.
    auto one = m;
    one.layers = 1;
    stage warm{one, t, 1};
    train(warm, 1);
  }
  std::int64_t swapped_growth = 0, step_growth = 0;
  {
    std::unique_ptr<stage> s;
    swapped_growth = growth([&] {
      s = std::make_unique<stage>(m, t, 1, false, swap_options{budget, tmp()});
      train(*s, 4);
    });
    auto averaged = average({ok(s->gradients(0))}); // the averaging's buffer, outside the stage
    step_growth = growth([&] { ok(s->apply(averaged, 0, 1.0)); });
  }
  INFO("budget " << budget << " B, one block's state " << block_state << " B, growth " << swapped_growth
                 << " B, step " << step_growth << " B");
  CHECK(swapped_growth > 0);
  CHECK(swapped_growth <= budget + block_state);
  CHECK(step_growth <= budget + block_state);
  // The in-memory relay grows by its whole state: the measure sees what swapping saves.
  std::int64_t memory_growth = growth([&] {
    stage s{m, t, 1};
    train(s, 4);
  });
  INFO("in memory: " << memory_growth << " B");
  CHECK(memory_growth > 2 * budget + block_state);
}

TEST_CASE("block store: advice reaches only its own regions, a released region keeps its values, a freed one is reused as zeros") {
  // MADV_DONTNEED on private memory would zero it: the store advises its own regions only.
  auto plain = torch::ones({512, 1024});
  block_store::release(plain);
  block_store::populate(plain, true);
  CHECK(plain.sum().item<double>() == 512.0 * 1024.0);
  block_store store{tmp()};
  auto a = store.adopt(torch::full({1000}, 3.0f));
  block_store::release(a); // its pages leave the process, its values stay in the file
  CHECK(a.sum().item<double>() == 3000.0);
  auto held = store.bytes_in_use();
  CHECK(held >= 4000);
  a = torch::Tensor();
  CHECK(store.bytes_in_use() == 0); // freed
  auto b = store.allocate({1000}, torch::kFloat); // the same region again, punched out
  CHECK(store.bytes_in_use() == held);
  CHECK(b.abs().sum().item<double>() == 0.0);
}
