#include <doctest/doctest.h>

#include <algorithm>

#include "model/partition.hpp"
#include "model/sizing.hpp"

using namespace gwtf::model;

TEST_CASE("partition: every block in exactly one relay stage, contiguous and balanced") {
  for (int layers = 1; layers <= 40; ++layers)
    for (int stages = 2; stages <= layers + 1; ++stages) {
      model_config c;
      c.layers = layers;
      c.stages = stages;
      auto spans = partition(c);
      INFO("layers " << layers << " stages " << stages);
      REQUIRE(spans.size() == static_cast<std::size_t>(stages));
      CHECK(spans[0].entry);
      CHECK(spans[0].exit);
      CHECK(spans[0].blocks() == 0);
      int next = 0;
      int lo = layers;
      int hi = 0;
      for (int s = 1; s < stages; ++s) {
        auto& sp = spans[static_cast<std::size_t>(s)];
        CHECK(sp.stage == s);
        CHECK(sp.first_layer == next);
        CHECK_FALSE(sp.entry);
        CHECK_FALSE(sp.exit);
        next = sp.end_layer;
        lo = std::min(lo, sp.blocks());
        hi = std::max(hi, sp.blocks());
      }
      CHECK(next == layers);
      CHECK(lo >= 1);
      CHECK(hi - lo <= 1);
    }
}

TEST_CASE("partition: description and activation size") {
  model_config c;
  c.layers = 5;
  c.stages = 3;
  auto spans = partition(c);
  CHECK(describe(spans[0]) == "stage 0: embedding + final norm, LM head, loss");
  CHECK(describe(spans[1]) == "stage 1: blocks 0-2");
  CHECK(describe(spans[2]) == "stage 2: blocks 3-4");
  c.hidden = 256;
  c.seq_len = 128;
  CHECK(activation_bytes(c, 4) == 4 * 128 * 256 * 4);
}

TEST_CASE("sizing: FLOPs per token follow the textbook counts, the heaviest stage is found") {
  model_config c;
  c.arch = architecture::gpt;
  c.layers = 5;
  c.stages = 3; // blocks 0-2 and 3-4
  c.hidden = 64;
  c.heads = 4;
  c.seq_len = 32;
  c.vocab = 100;
  double d = 64, t = 32, v = 100;
  auto spans = partition(c);
  // GPT, MLP 4d: 24 d^2 per block (qkv 6, proj 2, MLP 16) + 4 t d for attention.
  CHECK(size_of(c, spans[1]).forward_flops_per_token == doctest::Approx(3 * (24 * d * d + 4 * t * d)));
  CHECK(size_of(c, spans[1]).training_flops_per_token() == doctest::Approx(9 * (24 * d * d + 4 * t * d)));
  // The data holders' stage: only the LM head multiplies (the embedding is a lookup).
  CHECK(size_of(c, spans[0]).forward_flops_per_token == doctest::Approx(2 * d * v));
  CHECK(size_of(c, spans[0]).parameters == entry_parameters(c) + exit_parameters(c));
  CHECK(entry_parameters(c) == 100 * 64 + 32 * 64);
  CHECK(heaviest_relay_stage(c).stage == 1);
  c.layers = 4;
  c.stages = 4; // 2, 1, 1 blocks
  CHECK(heaviest_relay_stage(c).blocks() == 2);
  // LLaMA: SwiGLU's three matrices, no biases, no positions.
  c.arch = architecture::llama;
  c.ffn_hidden = 96;
  CHECK(block_parameters(c) == 2 * 64 + 4 * 64 * 64 + 3 * 64 * 96);
  CHECK(entry_parameters(c) == 100 * 64);
  CHECK(size_of(c, partition(c)[2]).forward_flops_per_token
        == doctest::Approx(2 * (4 * d * d + 3 * d * 96) + 4 * t * d));
}

TEST_CASE("a memory budget: the stash of what is in flight and the resident blocks share it, and the capacity drops to fit") {
  model_config c;
  c.layers = 6;
  c.hidden = 64;
  c.heads = 4;
  c.seq_len = 32;
  c.vocab = 100;
  c.stages = 2; // stage 1 holds the six blocks
  auto relay = partition(c)[1];
  double block_state = static_cast<double>(block_parameters(c)) * 16;
  double input = 2.0 * 32 * 64 * 4; // microbatch 2: one block's input
  double stash = 6 * input;         // swapped: every block keeps its input per microbatch in flight
  // No budget, or stage 0: nothing changes.
  auto none = plan_budget(c, relay, 2, 8, 0, false);
  CHECK_FALSE(none.swapped);
  CHECK(none.capacity == 8);
  CHECK(plan_budget(c, partition(c)[0], 2, 8, 1, false).capacity == 8);
  // A third of the state: swapped; 8 in flight leave room for one block, so all 8 stay and
  // the pool takes the rest (at least one block).
  double third = 2 * block_state;
  auto p = plan_budget(c, relay, 2, 8, third, false);
  CHECK(p.swapped);
  CHECK(p.capacity == 8);
  CHECK(p.pool == static_cast<int>((third - 8 * stash) / block_state));
  CHECK(p.pool >= 1);
  CHECK(p.pool * block_state + p.capacity * stash <= third);
  // A budget of one block and two microbatches' stash: the capacity drops to what fits.
  auto tight = plan_budget(c, relay, 2, 8, block_state + 2.5 * stash, false);
  CHECK(tight.swapped);
  CHECK(tight.capacity == 2);
  CHECK(tight.pool == 1);
  // Below one block: still one block and one microbatch (the least a relay can run with).
  auto tiny = plan_budget(c, relay, 2, 8, 1000, false);
  CHECK(tiny.capacity == 1);
  CHECK(tiny.pool == 1);
  // In memory (the state fits): the activations in flight must fit beside it.
  double state = 6 * block_state;
  double per_block = 2.0 * 32 * 64 * (68 + 10 * 4 * 32 / 64.0);
  auto stashing = plan_budget(c, relay, 2, 8, state + 3.5 * 6 * per_block, false);
  CHECK_FALSE(stashing.swapped);
  CHECK(stashing.capacity == 3);
  auto remat = plan_budget(c, relay, 2, 8, state + 3.5 * 6 * per_block, true); // inputs only
  CHECK(remat.capacity == 8);
}
