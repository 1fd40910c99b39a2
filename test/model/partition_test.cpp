#include <doctest/doctest.h>

#include <algorithm>

#include "model/partition.hpp"

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
