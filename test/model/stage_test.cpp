// Stage API against the unpartitioned reference: loss parity, gradient parity,
// export/import, exactly-once accounting, and a real learning check.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <string>

#include "model/checkpoint.hpp"
#include "model/exact_sums.hpp"
#include "model/pipeline.hpp"
#include "model/reference.hpp"
#include "model/sizing.hpp"
#include "model/stage_timing.hpp"
#include "model/torch_runtime.hpp"

#include <doctest/doctest.h> // after torch headers: glog redefines CHECK (toolchain.md)

using namespace gwtf::model;

namespace {

const std::string test_corpus = std::string{GWTF_SOURCE_DIR} + "/test/app/good_configs/corpus.txt";
const std::string demo_corpus = "/usr/share/games/fortunes/cookie";

model_config tiny(architecture arch) {
  model_config m;
  m.arch = arch;
  m.layers = 4;
  m.hidden = 32;
  m.heads = 4;
  m.seq_len = 16;
  m.vocab = 256;
  m.stages = 3;
  return m;
}

training_config short_run(int iterations) {
  training_config t;
  t.seed = 7;
  t.iterations = iterations;
  t.microbatch_size = 2;
  t.microbatches_per_holder = 2;
  t.warmup_iterations = 3;
  t.grad_clip = 0.5; // small enough that clipping is active in early steps
  return t;
}

corpus open_corpus(const std::string& path, const model_config& m) {
  data_config d;
  d.path = path;
  auto c = corpus::open(d, m.vocab, m.seq_len);
  REQUIRE_MESSAGE(std::holds_alternative<corpus>(c), std::get<std::string>(c));
  return std::get<corpus>(c);
}

template <class T>
T ok(outcome<T> r) {
  REQUIRE_MESSAGE(std::holds_alternative<T>(r), std::get<std::string>(r));
  return std::get<T>(r);
}

std::string name(architecture a) {
  return a == architecture::gpt ? "gpt" : "llama";
}

} // namespace

TEST_CASE("stage timing: a holder's and the heaviest relay stage's microbatch are timed through the stage API, for both families") {
  for (auto arch : {architecture::gpt, architecture::llama}) {
    INFO(name(arch));
    auto m = tiny(arch);
    m.layers = 3; // stages of 2 and 1 blocks: the heaviest is stage 1
    auto t = time_stages(m, short_run(1), 3);
    CHECK(t.repetitions == 3);
    CHECK(t.holder_s > 0);
    CHECK(t.relay_s > 0);
    CHECK(std::isfinite(t.holder_s));
    CHECK(std::isfinite(t.relay_s));
    CHECK(heaviest_relay_stage(m).blocks() == 2);
  }
}

TEST_CASE("(a) 20 steps through the stage API give the reference's per-step loss") {
  configure_torch(1);
  for (auto arch : {architecture::gpt, architecture::llama}) {
    INFO(name(arch));
    auto m = tiny(arch);
    auto t = short_run(20);
    auto text = open_corpus(test_corpus, m);
    local_pipeline pipe{m, t};
    reference_model ref{m, t};
    double worst = 0;
    for (std::int64_t it = 0; it < t.iterations; ++it) {
      double pipe_loss = 0;
      double ref_loss = 0;
      for (std::uint32_t h = 0; h < 2; ++h)
        for (std::uint32_t i = 0; i < 2; ++i) {
          microbatch_id id{static_cast<std::uint64_t>(it), h, i};
          auto tokens = sample(text, t.seed, id, t.microbatch_size, m.seq_len);
          pipe_loss += ok(pipe.run_microbatch(id.key(), tokens));
          ref_loss += ref.accumulate(id.key(), tokens);
        }
      double pipe_norm = ok(pipe.apply(it));
      double ref_norm = ref.apply(it);
      CHECK(pipe_norm == doctest::Approx(ref_norm).epsilon(1e-5));
      worst = std::max(worst, std::abs(pipe_loss - ref_loss) / std::abs(ref_loss));
    }
    MESSAGE(name(arch) << ": worst relative loss difference over 20 steps = " << worst);
    CHECK(worst <= 1e-5);
  }
}

TEST_CASE("(b) every stage's parameter gradients equal the unpartitioned gradients") {
  for (auto arch : {architecture::gpt, architecture::llama}) {
    INFO(name(arch));
    auto m = tiny(arch);
    auto t = short_run(5);
    auto text = open_corpus(test_corpus, m);
    local_pipeline pipe{m, t};
    reference_model ref{m, t};
    for (std::uint32_t i = 0; i < 3; ++i) {
      microbatch_id id{0, 0, i};
      auto tokens = sample(text, t.seed, id, t.microbatch_size, m.seq_len);
      ok(pipe.run_microbatch(id.key(), tokens));
      ref.accumulate(id.key(), tokens);
    }
    std::map<std::string, torch::Tensor> want;
    auto ref_grads = ref.gradients();
    auto ref_params = ref.parameters();
    REQUIRE(ref_grads.count == 3);
    for (std::size_t k = 0; k < ref_params.size(); ++k)
      want[ref_params[k].name] = ref_grads.sums[k];
    std::size_t compared = 0;
    for (int s = 0; s < m.stages; ++s) {
      auto g = ok(pipe.at(s).gradients());
      CHECK(g.count == 3);
      auto params = pipe.at(s).parameters();
      REQUIRE(g.sums.size() == params.size());
      for (std::size_t k = 0; k < params.size(); ++k) {
        INFO(params[k].name);
        REQUIRE(want.count(params[k].name) == 1);
        CHECK(torch::allclose(g.sums[k], want[params[k].name], 1e-4, 1e-6));
        ++compared;
      }
    }
    CHECK(compared == ref_params.size()); // the stages hold every parameter exactly once
  }
}

TEST_CASE("(c) export/import round-trips bit-exactly, truncated or corrupted blobs are rejected") {
  auto m = tiny(architecture::llama);
  auto t = short_run(5);
  auto text = open_corpus(test_corpus, m);
  local_pipeline pipe{m, t};
  for (std::int64_t it = 0; it < 2; ++it) {
    microbatch_id id{static_cast<std::uint64_t>(it), 0, 0};
    ok(pipe.run_microbatch(id.key(), sample(text, t.seed, id, t.microbatch_size, m.seq_len)));
    ok(pipe.apply(it));
  }
  auto blob = pipe.at(1).export_state();

  auto other = t;
  other.seed = 99; // different initial weights
  stage joiner{m, other, 1};
  auto before = joiner.weights_hash();
  CHECK(before != pipe.at(1).weights_hash());
  CHECK(ok(joiner.import_state(blob.data(), blob.size())));
  CHECK(joiner.weights_hash() == pipe.at(1).weights_hash());
  CHECK(joiner.export_state() == blob); // weights, moments and step count, bit for bit
  // What a checkpoint replica's receiver reads off the blob without LibTorch (model/checkpoint).
  auto info = describe_state_blob(blob);
  REQUIRE(std::holds_alternative<state_blob_info>(info));
  CHECK(std::get<state_blob_info>(info).stage == 1);
  CHECK(std::get<state_blob_info>(info).steps == 2);
  auto bad = blob;
  bad[bad.size() / 2] ^= 1;
  CHECK(std::get<std::string>(describe_state_blob(bad)) == "stage state: content hash mismatch");

  // A replica that counted microbatches and then loads a state (it fell behind or diverged)
  // must not carry those gradients, computed with the replaced weights, into its next share.
  stage behind{m, other, 1};
  auto input = torch::randn({t.microbatch_size, m.seq_len, m.hidden});
  ok(behind.forward(7, input));
  ok(behind.backward(7, torch::randn({t.microbatch_size, m.seq_len, m.hidden})));
  ok(behind.forward(8, input));
  REQUIRE(ok(behind.gradients()).count == 1);
  CHECK(ok(behind.import_state(blob.data(), blob.size())));
  CHECK(ok(behind.gradients()).count == 0);
  CHECK_FALSE(behind.counted(7));
  CHECK(behind.stashed() == 0);
  ok(behind.forward(7, input)); // the same key counts again under the loaded weights
  ok(behind.backward(7, torch::randn({t.microbatch_size, m.seq_len, m.hidden})));
  CHECK(ok(behind.gradients()).count == 1);
  CHECK(behind.duplicates() == 0);

  stage victim{m, other, 1};
  auto victim_hash = victim.weights_hash();
  auto rejected = [&](std::vector<std::uint8_t> bytes, const char* what) {
    auto r = victim.import_state(bytes.data(), bytes.size());
    INFO(what);
    REQUIRE(std::holds_alternative<std::string>(r));
    CHECK(victim.weights_hash() == victim_hash); // nothing changed
    return std::get<std::string>(r);
  };
  for (std::size_t n : {std::size_t{0}, std::size_t{7}, std::size_t{40}, blob.size() / 2, blob.size() - 1})
    rejected(std::vector<std::uint8_t>(blob.begin(), blob.begin() + static_cast<std::ptrdiff_t>(n)), "truncated");
  for (std::size_t at : {std::size_t{3}, std::size_t{20}, blob.size() / 3, blob.size() - 9}) {
    auto bad = blob;
    bad[at] ^= 0x10;
    auto why = rejected(bad, "corrupted");
    CHECK((why.find("hash mismatch") != std::string::npos || why.find("bad magic") != std::string::npos));
  }
  auto stage2 = pipe.at(2).export_state();
  CHECK(rejected(stage2, "other stage").find("holds stage 2, this is stage 1") != std::string::npos);
}

TEST_CASE("exactly once: a recomputed microbatch yields its input gradient but counts once") {
  auto m = tiny(architecture::gpt);
  auto t = short_run(5);
  auto text = open_corpus(test_corpus, m);
  stage relay{m, t, 1};
  stage twin{m, t, 1};
  auto input = torch::randn({t.microbatch_size, m.seq_len, m.hidden});
  auto grad_out = torch::randn({t.microbatch_size, m.seq_len, m.hidden});
  ok(relay.forward(5, input));
  auto g1 = ok(relay.backward(5, grad_out));
  // A crash elsewhere re-routed the microbatch here again: forward and backward recomputed.
  ok(relay.forward(5, input));
  auto g2 = ok(relay.backward(5, grad_out));
  CHECK(torch::equal(g1, g2));
  CHECK(relay.duplicates() == 1);
  CHECK(relay.counted(5));
  ok(twin.forward(5, input));
  ok(twin.backward(5, grad_out));
  auto a = ok(relay.gradients());
  auto b = ok(twin.gradients());
  CHECK(a.count == 1);
  for (std::size_t k = 0; k < a.sums.size(); ++k)
    CHECK(torch::equal(a.sums[k], b.sums[k]));
}

TEST_CASE("per-holder sums: a relay leaves a holder's microbatches out as if it never saw them") {
  auto m = tiny(architecture::gpt);
  auto t = short_run(5);
  stage relay{m, t, 1};
  stage only_a{m, t, 1}; // saw holder 0's microbatches only
  auto run = [&](stage& s, std::uint32_t holder, std::uint32_t j, std::uint64_t seed) {
    torch::manual_seed(seed);
    auto key = microbatch_id{4, holder, j}.key();
    ok(s.forward(key, torch::randn({t.microbatch_size, m.seq_len, m.hidden})));
    ok(s.backward(key, torch::randn({t.microbatch_size, m.seq_len, m.hidden})));
  };
  run(relay, 0, 0, 10);
  run(relay, 1, 0, 11); // holder 1's microbatches interleave with holder 0's
  run(relay, 0, 1, 12);
  run(relay, 1, 1, 13);
  run(relay, 1, 2, 14);
  run(only_a, 0, 0, 10);
  run(only_a, 0, 1, 12);
  auto all = ok(relay.gradients());
  CHECK(all.count == 5);
  CHECK(all.holders == std::map<std::uint32_t, std::int64_t>{{0, 2}, {1, 3}});
  auto a = ok(relay.gradients(4, std::set<std::uint32_t>{0}));
  auto want = ok(only_a.gradients());
  CHECK(a.count == 2);
  CHECK(a.holders == std::map<std::uint32_t, std::int64_t>{{0, 2}});
  REQUIRE(a.sums.size() == want.sums.size());
  for (std::size_t k = 0; k < a.sums.size(); ++k)
    CHECK(torch::equal(a.sums[k], want.sums[k])); // bit for bit: the same additions
  // Both holders: their sums added; every holder in the filter is the whole sum.
  auto both = ok(relay.gradients(4, std::set<std::uint32_t>{0, 1, 7}));
  CHECK(both.count == 5);
  for (std::size_t k = 0; k < both.sums.size(); ++k)
    CHECK(torch::equal(both.sums[k], all.sums[k]));
  auto b = ok(relay.gradients(4, std::set<std::uint32_t>{1}));
  CHECK(b.count == 3);
  for (std::size_t k = 0; k < all.sums.size(); ++k)
    CHECK(torch::allclose(a.sums[k] + b.sums[k], all.sums[k], 1e-5, 1e-6));
  auto none = ok(relay.gradients(4, std::set<std::uint32_t>{}));
  CHECK(none.count == 0);
  CHECK(none.sums.empty());
}

namespace {

// A relay microbatch of the sum-order tests: its data holder and index, and the scale of its
// output gradient (magnitudes that differ by decades make float sums order-dependent).
struct scaled_microbatch {
  std::uint32_t holder, index;
  float scale;
};

// Forward and backward of `mb` at `relay` (stage 1 of `m`), with inputs seeded by `seed`.
void relay_microbatch(stage& relay, const model_config& m, const training_config& t, const scaled_microbatch& mb,
                      std::uint64_t seed) {
  torch::manual_seed(seed);
  auto in = torch::randn({t.microbatch_size, m.seq_len, m.hidden});
  auto grad = torch::randn({t.microbatch_size, m.seq_len, m.hidden}) * mb.scale;
  auto key = microbatch_id{4, mb.holder, mb.index}.key();
  ok(relay.forward(key, in));
  ok(relay.backward(key, grad));
}

} // namespace

TEST_CASE("reproducible sums: the same microbatches in any arrival order give the same bits") {
  // Six microbatches of two holders with gradients of very different magnitudes (float
  // addition is not associative): every arrival order gives bit-identical sums, and the
  // double_count seam still adds its microbatch twice.
  auto m = tiny(architecture::gpt);
  auto t = short_run(5);
  std::vector<scaled_microbatch> mbs = {{0, 0, 1.0f}, {0, 1, 3e-4f}, {0, 2, 7e3f}, {1, 0, 1e-2f}, {1, 1, 5e2f}, {1, 2, 1.7f}};
  auto run = [&](std::vector<std::size_t> order, bool twice, sum_order how = sum_order::key_order) {
    auto tt = t;
    tt.reproducible_sums = how;
    stage relay{m, tt, 1};
    for (auto i : order) {
      if (twice && i == 3)
        relay.add_next_twice();
      relay_microbatch(relay, m, t, mbs[i], 100 + i);
    }
    return ok(relay.gradients());
  };
  auto base = run({0, 1, 2, 3, 4, 5}, false);
  std::mt19937 rng{11}; // seed 11: printed on failure with the order
  std::vector<std::size_t> order = {0, 1, 2, 3, 4, 5};
  bool some_order_differs_in_float = false;
  for (int round = 0; round < 6; ++round) {
    std::shuffle(order.begin(), order.end(), rng);
    INFO("arrival order " << order[0] << order[1] << order[2] << order[3] << order[4] << order[5] << " (rng seed 11)");
    auto other = run(order, false);
    CHECK(other.count == 6);
    REQUIRE(other.sums.size() == base.sums.size());
    for (std::size_t k = 0; k < base.sums.size(); ++k)
      CHECK(torch::equal(other.sums[k], base.sums[k]));
    // training.reproducible_sums off: added in that arrival order, some parameter differs
    // in its last bits (the test can tell an arrival-order sum).
    auto arrival = run(order, false, sum_order::off);
    CHECK(arrival.count == 6);
    for (std::size_t k = 0; k < arrival.sums.size(); ++k) {
      // the same sum up to rounding: relative to the largest entry (the magnitudes span 7 decades)
      CHECK((arrival.sums[k] - base.sums[k]).abs().max().item<double>()
            <= 1e-5 * base.sums[k].abs().max().item<double>() + 1e-12);
      some_order_differs_in_float = some_order_differs_in_float || !torch::equal(arrival.sums[k], base.sums[k]);
    }
  }
  CHECK(some_order_differs_in_float);
  // The seam: microbatch 3 added twice, in any order.
  auto twice = run({5, 3, 0, 1, 4, 2}, true);
  CHECK(twice.count == 6);
  bool differs = false;
  for (std::size_t k = 0; k < base.sums.size(); ++k)
    differs = differs || !torch::equal(twice.sums[k], base.sums[k]);
  CHECK(differs);
}

TEST_CASE("exact sums: the grid rounds once, half to even, clamps at 32 and counts a NaN as 0") {
  const double unit = std::ldexp(1.0, -exact_sum_fraction_bits);
  auto g = torch::tensor({0.0f, 1.0f, -1.0f, 1e-13f, 3e-12f, 0.5f * static_cast<float>(unit),
                          1.5f * static_cast<float>(unit), 40.0f, -1e30f, std::nanf(""),
                          std::numeric_limits<float>::infinity()});
  auto q = to_exact(g);
  REQUIRE(is_exact(q));
  auto at = [&](int k) { return q[k].item<std::int64_t>(); };
  const std::int64_t one = std::int64_t{1} << exact_sum_fraction_bits, top = std::int64_t{1} << exact_sum_clamp_bits;
  CHECK(at(0) == 0);
  CHECK(at(1) == one);
  CHECK(at(2) == -one);
  CHECK(at(3) == 0);                                          // below half a unit: lost
  CHECK(at(4) == std::llround(3e-12 / unit));                 // 3e-12 is 3.3 units
  CHECK(at(5) == 0);                                          // half a unit: to even (0)
  CHECK(at(6) == 2);                                          // one and a half: to even (2)
  CHECK(at(7) == top);                                        // 40 > 32: clamped
  CHECK(at(8) == -top);
  CHECK(at(9) == 0);                                          // NaN
  CHECK(at(10) == top);                                       // +inf
  // The average: the integer sum over the grid, divided once.
  auto avg = exact_average(torch::tensor({3 * one, -one, std::int64_t{7}}), 2);
  CHECK((avg.scalar_type() == torch::kFloat));
  CHECK(avg[0].item<float>() == 1.5f);
  CHECK(avg[1].item<float>() == -0.5f);
  CHECK(avg[2].item<float>() == static_cast<float>(7 * unit / 2));
}

TEST_CASE("exact sums: a stage's average has the same bits however its microbatches were split over replicas") {
  // Six microbatches of two holders, split over one to three replicas in several ways and
  // orders (rng seed 5, printed with each split): training.reproducible_sums exact gives
  // bit-identical averages for every split, while key_order's (float) averages differ in some
  // split, and both agree to float rounding.
  auto m = tiny(architecture::gpt);
  auto t = short_run(5);
  std::vector<scaled_microbatch> mbs = {{0, 0, 1.0f}, {0, 1, 3e-4f}, {0, 2, 2.0f}, {1, 0, 1e-2f}, {1, 1, 0.5f}, {1, 2, 1.7f}};
  // The replicas' gradient sums when replica r computes the microbatches assign[i] == r.
  auto run = [&](const std::vector<std::size_t>& order, const std::vector<int>& assign, sum_order how) {
    auto tt = t;
    tt.reproducible_sums = how;
    std::vector<stage> replicas;
    for (int r = 0; r < 3; ++r)
      replicas.emplace_back(m, tt, 1);
    for (auto i : order)
      relay_microbatch(replicas[static_cast<std::size_t>(assign[i])], m, t, mbs[i], 100 + i);
    std::vector<gradient_sum> sums;
    for (auto& r : replicas)
      sums.push_back(ok(r.gradients()));
    return average(sums);
  };
  std::vector<std::size_t> order = {0, 1, 2, 3, 4, 5};
  auto exact_base = run(order, {0, 0, 0, 0, 0, 0}, sum_order::exact);
  auto float_base = run(order, {0, 0, 0, 0, 0, 0}, sum_order::key_order);
  REQUIRE(exact_base.size() == float_base.size());
  for (std::size_t k = 0; k < exact_base.size(); ++k) {
    CHECK_FALSE(is_exact(exact_base[k]));
    CHECK((exact_base[k] - float_base[k]).abs().max().item<double>()
          <= 1e-6 * float_base[k].abs().max().item<double>() + 1e-11);
  }
  std::mt19937 rng{5};
  bool float_differs = false;
  for (int round = 0; round < 8; ++round) {
    std::shuffle(order.begin(), order.end(), rng);
    std::vector<int> assign(6);
    for (auto& a : assign)
      a = static_cast<int>(rng() % 3);
    INFO("order " << order[0] << order[1] << order[2] << order[3] << order[4] << order[5] << ", replicas "
                  << assign[0] << assign[1] << assign[2] << assign[3] << assign[4] << assign[5] << " (rng seed 5)");
    auto exact = run(order, assign, sum_order::exact);
    for (std::size_t k = 0; k < exact.size(); ++k)
      CHECK(torch::equal(exact[k], exact_base[k]));
    auto floats = run(order, assign, sum_order::key_order);
    for (std::size_t k = 0; k < floats.size(); ++k)
      float_differs = float_differs || !torch::equal(floats[k], float_base[k]);
  }
  CHECK(float_differs); // the test can tell a grouping-dependent sum
}

TEST_CASE("rematerialise: a relay that keeps only inputs computes what a stashing relay computes") {
  for (auto arch : {architecture::gpt, architecture::llama}) {
    INFO(name(arch));
    auto m = tiny(arch);
    auto t = short_run(5);
    stage stash{m, t, 1};
    stage remat{m, t, 1, true};
    auto in1 = torch::randn({t.microbatch_size, m.seq_len, m.hidden});
    auto in2 = torch::randn({t.microbatch_size, m.seq_len, m.hidden});
    auto go1 = torch::randn({t.microbatch_size, m.seq_len, m.hidden});
    auto go2 = torch::randn({t.microbatch_size, m.seq_len, m.hidden});
    // Two microbatches in flight, backward in the other order.
    for (auto* st : {&stash, &remat}) {
      ok(st->forward(1, in1));
      ok(st->forward(2, in2));
    }
    CHECK(remat.stashed() == 2);
    CHECK(torch::equal(ok(stash.forward(3, in1)), ok(remat.forward(3, in1))));
    CHECK(stash.drop(3));
    CHECK(remat.drop(3));
    CHECK(torch::equal(ok(stash.backward(2, go2)), ok(remat.backward(2, go2))));
    CHECK(torch::equal(ok(stash.backward(1, go1)), ok(remat.backward(1, go1))));
    CHECK(remat.stashed() == 0);
    CHECK(remat.counted(1));
    auto a = ok(stash.gradients());
    auto b = ok(remat.gradients());
    CHECK(b.count == 2);
    REQUIRE(a.sums.size() == b.sums.size());
    for (std::size_t k = 0; k < a.sums.size(); ++k)
      CHECK(torch::equal(a.sums[k], b.sums[k]));
    auto again = remat.backward(1, go1); // its input is gone with the backward
    CHECK(std::holds_alternative<std::string>(again));
  }
}

TEST_CASE("SWARM calls: a forward kept nowhere and a backward by another replica compute what one stashing relay does") {
  for (auto arch : {architecture::gpt, architecture::llama}) {
    INFO(name(arch));
    auto m = tiny(arch);
    auto t = short_run(5);
    stage stash{m, t, 1};
    stage called{m, t, 1}; // a replica that never saw the microbatches' forwards
    auto in1 = torch::randn({t.microbatch_size, m.seq_len, m.hidden});
    auto in2 = torch::randn({t.microbatch_size, m.seq_len, m.hidden});
    auto go1 = torch::randn({t.microbatch_size, m.seq_len, m.hidden});
    auto go2 = torch::randn({t.microbatch_size, m.seq_len, m.hidden});
    auto out1 = ok(stash.forward(1, in1));
    ok(stash.forward(2, in2));
    CHECK(torch::equal(out1, ok(called.forward_only(in1))));
    CHECK(called.stashed() == 0); // a forward call keeps nothing
    CHECK(torch::equal(ok(stash.backward(2, go2)), ok(called.recompute_backward(2, in2, go2))));
    CHECK(torch::equal(ok(stash.backward(1, go1)), ok(called.recompute_backward(1, in1, go1))));
    CHECK(called.stashed() == 0);
    // Asked again (a re-sent call): the input gradient again, the parameter gradients once.
    CHECK(torch::equal(ok(called.recompute_backward(1, in1, go1)), ok(stage{m, t, 1}.recompute_backward(1, in1, go1))));
    CHECK(called.additions(1) == 1);
    CHECK(called.duplicates() == 1);
    auto a = ok(stash.gradients());
    auto b = ok(called.gradients());
    CHECK(b.count == 2);
    REQUIRE(a.sums.size() == b.sums.size());
    for (std::size_t k = 0; k < a.sums.size(); ++k)
      CHECK(torch::equal(a.sums[k], b.sums[k]));
    stage holder{m, t, 0};
    CHECK(std::holds_alternative<std::string>(holder.forward_only(in1))); // stage 0 has no blocks
  }
}

TEST_CASE("stash: drop frees a re-routed microbatch, backward without forward is an error") {
  auto m = tiny(architecture::gpt);
  auto t = short_run(5);
  stage relay{m, t, 2};
  auto input = torch::randn({1, m.seq_len, m.hidden});
  ok(relay.forward(1, input));
  ok(relay.forward(2, input));
  CHECK(relay.stashed() == 2);
  CHECK(relay.drop(1));
  CHECK_FALSE(relay.drop(1));
  CHECK(relay.stashed() == 1);
  auto r = relay.backward(1, input);
  REQUIRE(std::holds_alternative<std::string>(r));
  CHECK(std::get<std::string>(r).find("no stashed forward for microbatch 1") != std::string::npos);
  auto wrong = relay.embed(3, torch::zeros({1, m.seq_len}, torch::kInt64));
  CHECK(std::holds_alternative<std::string>(wrong)); // relays have no embedding
  stage holder{m, t, 0};
  // Head passed, embedding backward pending: gradients are not ready yet.
  auto tokens = torch::zeros({1, m.seq_len}, torch::kInt64);
  auto act = ok(holder.embed(9, tokens));
  ok(holder.head(9, act, tokens));
  CHECK(std::holds_alternative<std::string>(holder.gradients()));
}

TEST_CASE("(d) both architectures clearly reduce loss on the demo corpus") {
  for (auto arch : {architecture::gpt, architecture::llama}) {
    model_config m;
    m.arch = arch;
    m.layers = 2;
    m.hidden = 64;
    m.heads = 4;
    m.seq_len = 32;
    m.stages = 2;
    training_config t;
    t.seed = 3;
    t.iterations = 60;
    t.microbatch_size = 8;
    t.microbatches_per_holder = 1;
    t.warmup_iterations = 5;
    data_config d;
    d.path = demo_corpus;
    std::vector<double> losses;
    auto r = run_reference(m, t, d, 1, [&](const reference_report& rep) { losses.push_back(rep.loss); });
    REQUIRE_MESSAGE(std::holds_alternative<bool>(r), std::get<std::string>(r));
    double first = (losses[0] + losses[1] + losses[2]) / 3;
    double last = (losses[57] + losses[58] + losses[59]) / 3;
    MESSAGE(name(arch) << ": loss " << first << " -> " << last);
    CHECK(first == doctest::Approx(std::log(256.0)).epsilon(0.05)); // starts near uniform
    CHECK(last < 0.7 * first); // measured: 5.41 -> 3.05 (gpt), 5.45 -> 3.09 (llama)
  }
}

TEST_CASE("fast_hash: every flipped bit, length and seed changes the hash") {
  std::vector<std::uint8_t> buf(1000 + 13); // 31 full 32-byte blocks and a 21-byte tail
  for (std::size_t i = 0; i < buf.size(); ++i)
    buf[i] = static_cast<std::uint8_t>((i * 131) ^ (i >> 3));
  auto base = fast_hash(buf.data(), buf.size());
  CHECK(base == fast_hash(buf.data(), buf.size())); // deterministic
  std::set<std::uint64_t> seen{base};
  for (std::size_t byte = 0; byte < buf.size(); ++byte)
    for (int bit = 0; bit < 8; ++bit) {
      buf[byte] ^= static_cast<std::uint8_t>(1u << bit);
      auto h = fast_hash(buf.data(), buf.size());
      buf[byte] ^= static_cast<std::uint8_t>(1u << bit);
      CAPTURE(byte);
      CAPTURE(bit);
      CHECK(seen.insert(h).second); // distinct from the original and every other flip
    }
  CHECK(fast_hash(buf.data(), buf.size() - 1) != base);
  CHECK(fast_hash(buf.data(), buf.size(), 7) != base);
  // a word moved to another lane changes the hash (lanes are not interchangeable)
  std::vector<std::uint8_t> swapped = buf;
  std::swap_ranges(swapped.begin(), swapped.begin() + 8, swapped.begin() + 8);
  CHECK(fast_hash(swapped.data(), swapped.size()) != base);
}

TEST_CASE("sizing: every stage's parameter count is what the torch modules allocate") {
  // Both families, the default and an explicit MLP width, even and uneven partitions.
  for (auto arch : {architecture::gpt, architecture::llama})
    for (int ffn : {0, 72})
      for (int stages : {2, 3, 4}) {
        auto m = tiny(arch);
        m.layers = 5;
        m.stages = stages;
        m.ffn_hidden = ffn;
        INFO("arch " << static_cast<int>(arch) << ", ffn_hidden " << ffn << ", stages " << stages);
        std::int64_t total = 0;
        auto spans = partition(m);
        for (int s = 0; s < stages; ++s) {
          stage st{m, short_run(1), s};
          std::int64_t allocated = 0;
          for (auto& p : st.parameters())
            allocated += p.tensor.numel();
          CHECK(size_of(m, spans[static_cast<std::size_t>(s)]).parameters == allocated);
          total += allocated;
        }
        CHECK(model_parameters(m) == total);
      }
}

// training.averaging overlap in the reference trainer (hivemind's delayed optimizer step):
// iteration t computes on the weights before t-1's step, and every step is one iteration stale.
TEST_CASE("reference trainer, overlap: each step lands one iteration late, and the loss still falls") {
  configure_torch(1);
  auto m = tiny(architecture::gpt);
  auto t = short_run(3);
  auto text = open_corpus(test_corpus, m);
  auto batch = [&](reference_model& ref, std::uint64_t it) {
    double loss = 0;
    for (std::uint32_t i = 0; i < 2; ++i) {
      microbatch_id id{it, 0, i};
      loss += ref.accumulate(id.key(), sample(text, t.seed, id, t.microbatch_size, m.seq_len));
    }
    return loss / 2;
  };
  auto same_weights = [](const reference_model& a, const reference_model& b) {
    auto pa = a.parameters(), pb = b.parameters();
    REQUIRE(pa.size() == pb.size());
    for (std::size_t k = 0; k < pa.size(); ++k)
      if (!torch::equal(pa[k].tensor, pb[k].tensor))
        return false;
    return true;
  };
  // By hand: sync takes g0's step before batch 1; overlap computes batch 1 on W0 and then
  // takes g0's step, which gives the very weights sync had after its first step.
  reference_model sync{m, t}, overlap{m, t};
  double s0 = batch(sync, 0);
  sync.apply(0);
  double o0 = batch(overlap, 0);
  auto [g0, n0] = overlap.take_average();
  CHECK(s0 == o0);
  CHECK(same_weights(sync, reference_model{m, t}) == false); // sync stepped...
  double o1 = batch(overlap, 1);                              // ...overlap computes on W0
  auto [g1, n1] = overlap.take_average();
  overlap.step(g0, n0, 0);
  CHECK(same_weights(sync, overlap)); // W1 either way: g0, applied once
  double s1 = batch(sync, 1);
  CHECK(s1 != o1); // batch 1 at W1 (sync) and at W0 (overlap)

  // run_reference with overlap reports exactly those losses, and trains.
  std::vector<double> sync_losses, overlap_losses;
  data_config d;
  d.path = test_corpus;
  auto two = t;
  two.microbatches_per_holder = 2;
  REQUIRE(std::holds_alternative<bool>(run_reference(m, two, d, 1, [&](auto& r) { sync_losses.push_back(r.loss); })));
  REQUIRE(std::holds_alternative<bool>(run_reference(m, two, d, 1, [&](auto& r) { overlap_losses.push_back(r.loss); },
                                                     averaging_mode::overlap)));
  REQUIRE(overlap_losses.size() == 3);
  CHECK(overlap_losses[0] == doctest::Approx(o0).epsilon(1e-12));
  CHECK(overlap_losses[1] == doctest::Approx(o1).epsilon(1e-12));
  CHECK(sync_losses[1] == doctest::Approx(s1).epsilon(1e-12));
  CHECK(overlap_losses[1] != sync_losses[1]);

  auto longer = short_run(40);
  longer.microbatches_per_holder = 2;
  std::vector<double> curve;
  REQUIRE(std::holds_alternative<bool>(run_reference(m, longer, d, 1, [&](auto& r) { curve.push_back(r.loss); },
                                                     averaging_mode::overlap)));
  double first = (curve[0] + curve[1] + curve[2]) / 3, last = (curve[37] + curve[38] + curve[39]) / 3;
  MESSAGE("overlap: loss " << first << " -> " << last);
  CHECK(last < 0.8 * first);
}

// training.averaging overlap in the runtime: a replica accumulates iteration t + 1 while t is
// averaged. The sums of the two stay apart, t's step forgets t's only, and a forward of t + 1
// stashed before that step is differentiated with the weights after it (computed again from
// its input), never through weights that changed under it.
TEST_CASE("stage, overlap: two iterations accumulate apart, a step forgets its own, a stash from before a step is computed again") {
  configure_torch(1);
  auto m = tiny(architecture::gpt);
  auto t = short_run(5);
  auto tensor = [&](std::uint64_t seed) {
    torch::manual_seed(seed);
    return torch::randn({t.microbatch_size, m.seq_len, m.hidden});
  };
  auto k0 = microbatch_id{0, 0, 0}.key(), k1 = microbatch_id{1, 1, 0}.key();
  stage early{m, t, 1}, late{m, t, 1};
  for (auto* s : {&early, &late}) {
    ok(s->forward(k0, tensor(1)));
    ok(s->backward(k0, tensor(2)));
  }
  ok(early.forward(k1, tensor(3))); // iteration 1's forward before iteration 0's step
  auto g0 = ok(early.gradients(0));
  CHECK(g0.count == 1);
  CHECK(ok(early.gradients(1)).count == 0);
  for (auto* s : {&early, &late})
    CHECK(ok(s->apply(average({g0}), 0, 1.0)));
  ok(late.forward(k1, tensor(3))); // the same forward after the step
  auto in_early = ok(early.backward(k1, tensor(4)));
  auto in_late = ok(late.backward(k1, tensor(4)));
  CHECK(torch::equal(in_early, in_late));
  auto g1 = ok(early.gradients(1)), want = ok(late.gradients(1));
  REQUIRE(g1.count == 1);
  for (std::size_t k = 0; k < g1.sums.size(); ++k)
    CHECK(torch::equal(g1.sums[k], want.sums[k]));

  // Iteration 2 accumulates while 1 is averaged: 1's step leaves 2's sums alone.
  auto k2 = microbatch_id{2, 0, 1}.key();
  ok(early.forward(k2, tensor(5)));
  ok(early.backward(k2, tensor(6)));
  CHECK(ok(early.gradients()).count == 2); // every iteration not stepped
  CHECK(ok(early.apply(average({g1}), 1, 1.0)));
  CHECK(ok(early.gradients(1)).count == 0);
  CHECK_FALSE(early.counted(k1));
  CHECK(early.counted(k2));
  CHECK(ok(early.gradients(2)).count == 1);
}

// The sums of every held iteration are added out of place: one holder's sums of an iteration
// are its running sums themselves, which an in-place addition would change for good.
TEST_CASE("reference model: the sums of two held iterations are the same each time they are asked for") {
  configure_torch(1);
  auto m = tiny(architecture::gpt);
  auto t = short_run(5);
  auto text = open_corpus(test_corpus, m);
  reference_model ref{m, t};
  for (std::uint64_t it = 0; it < 2; ++it) { // one holder's microbatch in each of two iterations
    microbatch_id id{it, 0, 0};
    ref.accumulate(id.key(), sample(text, t.seed, id, t.microbatch_size, m.seq_len));
  }
  auto first = ref.gradients();
  std::vector<torch::Tensor> kept;
  for (auto& g : first.sums)
    kept.push_back(g.clone());
  auto again = ref.gradients();
  REQUIRE(again.count == 2);
  REQUIRE(again.sums.size() == kept.size());
  for (std::size_t k = 0; k < kept.size(); ++k)
    CHECK(torch::equal(again.sums[k], kept[k]));
}

TEST_CASE("state blob: a pending step (overlap) travels with the state and names the iteration it resumes at, and a version-2 state still loads") {
  configure_torch(1);
  auto m = tiny(architecture::gpt);
  auto t = short_run(5);
  stage a{m, t, 1};
  torch::manual_seed(9);
  auto key = microbatch_id{0, 0, 0}.key();
  ok(a.forward(key, torch::randn({t.microbatch_size, m.seq_len, m.hidden})));
  ok(a.backward(key, torch::randn({t.microbatch_size, m.seq_len, m.hidden})));
  CHECK(ok(a.apply(average({ok(a.gradients(0))}), 0, 1.0))); // one step: the next is iteration 1's
  pending_update p{1, 0.75, {}};
  for (auto& q : a.parameters())
    p.averaged.push_back(torch::randn_like(q.tensor));
  auto blob = a.export_state(&p);
  stage b{m, t, 1};
  std::optional<pending_update> got;
  REQUIRE(ok(b.import_state(blob.data(), blob.size(), &got)));
  REQUIRE(got.has_value());
  CHECK(got->iteration == 1);
  CHECK(got->global_norm == 0.75);
  REQUIRE(got->averaged.size() == p.averaged.size());
  for (std::size_t k = 0; k < p.averaged.size(); ++k)
    CHECK(torch::equal(got->averaged[k], p.averaged[k]));
  CHECK(b.export_state(&*got) == blob);
  CHECK(b.weights_hash() == a.weights_hash());
  // Checkpoints are named by the iteration their state resumes at: after a pending step.
  CHECK(std::get<state_blob_info>(describe_state_blob(blob)).steps == 2);
  auto plain = a.export_state();
  CHECK(std::get<state_blob_info>(describe_state_blob(plain)).steps == 1);
  REQUIRE(ok(b.import_state(plain.data(), plain.size(), &got)));
  CHECK_FALSE(got.has_value());

  // A pending step of another iteration than the state's next is refused, naming it.
  auto wrong = p;
  wrong.iteration = 3;
  auto bad = a.export_state(&wrong);
  auto r = b.import_state(bad.data(), bad.size(), &got);
  REQUIRE(std::holds_alternative<std::string>(r));
  CHECK(std::get<std::string>(r).find("pending step is of iteration 3") != std::string::npos);

  // Version 2 (before pending steps): no flag byte before the hash.
  std::vector<std::uint8_t> v2(plain.begin(), plain.end() - 9);
  std::uint32_t two = 2;
  std::memcpy(v2.data() + 8, &two, sizeof two);
  auto h = fast_hash(v2.data(), v2.size());
  auto* hb = reinterpret_cast<const std::uint8_t*>(&h);
  v2.insert(v2.end(), hb, hb + sizeof h);
  stage c{m, t, 1};
  got = p;
  REQUIRE(ok(c.import_state(v2.data(), v2.size(), &got)));
  CHECK_FALSE(got.has_value());
  CHECK(c.weights_hash() == a.weights_hash());
  CHECK(c.steps() == 1);
}
