// Gradient shares in chunks (actors/core/share_assembly.hpp): cut on one side, put together on
// the other with bounded memory; bad chunks are refused with a reason and lose nothing else.
#include <algorithm>
#include <optional>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "actors/core/share_assembly.hpp"
#include "model/share_codec.hpp"
#include "doctest/doctest.h"

using namespace gwtf;
using namespace gwtf::actors;

namespace {

wire::gradient_chunk share_of(std::uint64_t iteration, const std::vector<float>& values, std::uint64_t mbs = 3) {
  wire::gradient_chunk c;
  c.iteration = iteration;
  c.stage = 2;
  c.contributors = {"r1"};
  c.microbatches = mbs;
  c.total_elements = values.size();
  c.values = wire::tensor_payload::copy_of(wire::dtype::float32, {static_cast<std::int64_t>(values.size())},
                                           values.data(), values.size() * sizeof(float));
  c.holders = {{"dh-a", 2}, {"dh-b", 1}};
  wire::iteration_done d;
  d.holder = "dh-a";
  d.iteration = iteration;
  c.reports = {d};
  return c;
}

std::vector<float> values_of(const wire::gradient_chunk& c) {
  std::vector<float> v(static_cast<std::size_t>(c.values.shape.at(0)));
  std::memcpy(v.data(), c.values.bytes.get(), v.size() * sizeof(float));
  return v;
}

std::vector<float> ramp(std::size_t n, unsigned seed) {
  std::mt19937 rng{seed};
  std::uniform_real_distribution<float> u{-1, 1};
  std::vector<float> v(n);
  for (auto& x : v)
    x = u(rng);
  return v;
}

} // namespace

TEST_CASE("share assembly: a share cut into chunks comes back whole in any order, bit for bit, with its metadata") {
  for (unsigned seed : {1u, 2u, 3u}) {
    INFO("seed " << seed);
    std::mt19937 rng{seed};
    auto n = 1 + rng() % 5000;
    auto chunk = 1 + rng() % 700;
    auto v = ramp(n, seed);
    auto share = share_of(7, v);
    share.keys_digest = 0x1234567890abcdefull + seed; // the exactly-once digest rides on every chunk
    auto pieces = cut_share(share, chunk);
    CHECK(pieces.size() == (n + chunk - 1) / chunk);
    for (std::size_t i = 0; i < pieces.size(); ++i) {
      CHECK(pieces[i].offset == i * chunk);
      CHECK(static_cast<std::size_t>(pieces[i].values.shape[0]) <= chunk);
      CHECK(pieces[i].reports.size() == (i == 0 ? 1u : 0u)); // the reports ride on the first
      CHECK(pieces[i].holders.size() == 2u);                  // the counts on every chunk
    }
    share_assembler a{n, 2, 1};
    std::shuffle(pieces.begin(), pieces.end(), rng); // any order: the embedded link's timers reorder
    std::optional<wire::gradient_chunk> whole;
    for (auto& p : pieces) {
      CHECK_FALSE(whole); // complete only with the last chunk
      auto out = a.add("r1", std::move(p));
      CHECK(out.error.empty());
      whole = std::move(out.whole);
    }
    REQUIRE(whole);
    CHECK(values_of(*whole) == v);
    CHECK(whole->offset == 0);
    CHECK(whole->microbatches == 3);
    CHECK(whole->holders.size() == 2);
    CHECK(whole->reports.size() == 1);
    CHECK(whole->keys_digest == 0x1234567890abcdefull + seed);
    CHECK(a.pending() == 0);
    CHECK(a.pending_bytes() == 0);
  }
}

TEST_CASE("share assembly: a share that fits one chunk and an empty share pass through") {
  share_assembler a{4};
  auto one = cut_share(share_of(1, {1, 2, 3, 4}), 4);
  REQUIRE(one.size() == 1);
  auto out = a.add("r1", std::move(one.front()));
  REQUIRE(out.whole);
  CHECK(values_of(*out.whole) == std::vector<float>{1, 2, 3, 4});
  wire::gradient_chunk empty;
  empty.iteration = 1;
  empty.values = {wire::dtype::float32, {0}, nullptr, 0, false, {}};
  out = a.add("r2", std::move(empty));
  CHECK(out.error.empty());
  CHECK(out.whole);
}

TEST_CASE("share assembly: refused chunks name what is wrong and leave other shares alone") {
  auto v = ramp(100, 9);
  share_assembler a{100, 2, 30};
  // r2's share is under way and must survive everything r1 does wrong.
  auto r2 = cut_share(share_of(4, v), 30);
  CHECK(a.add("r2", std::move(r2[0])).error.empty());
  SUBCASE("a share of another size") {
    auto out = a.add("r1", share_of(4, ramp(99, 1)));
    CHECK(out.error.find("99 values; this stage has 100") != std::string::npos);
  }
  SUBCASE("a small chunk that is not the share's last (it would make the bookkeeping grow)") {
    auto p = cut_share(share_of(4, v), 10);
    auto out = a.add("r1", std::move(p[3]));
    CHECK(out.error.find("fewer than 30") != std::string::npos);
    auto last = cut_share(share_of(4, v), 30).back(); // 10 values, but the last: taken
    CHECK(a.add("r1", std::move(last)).error.empty());
  }
  SUBCASE("a chunk that overlaps what came begins the share again") {
    auto p = cut_share(share_of(4, v), 30);
    CHECK(a.add("r1", std::move(p[0])).error.empty());
    CHECK(a.add("r1", std::move(p[1])).error.empty());
    auto again = cut_share(share_of(4, v), 30);
    CHECK(a.add("r1", std::move(again[1])).error.empty()); // overlaps [30, 60): a new share
    CHECK_FALSE(a.add("r1", std::move(again[2])).whole);
    CHECK_FALSE(a.add("r1", std::move(again[3])).whole); // [0, 30) of the new one is missing
    auto out = a.add("r1", std::move(again[0]));
    REQUIRE(out.whole);
    CHECK(values_of(*out.whole) == v);
  }
  SUBCASE("a chunk of a repaired share (other microbatches) begins the share again") {
    auto p = cut_share(share_of(4, v), 30);
    CHECK(a.add("r1", std::move(p[0])).error.empty());
    auto repaired = cut_share(share_of(4, v, 2), 30);
    std::optional<wire::gradient_chunk> whole;
    for (std::size_t i = repaired.size(); i-- > 0;) { // backwards, to be sure
      auto out = a.add("r1", std::move(repaired[i]));
      CHECK(out.error.empty());
      if (out.whole)
        whole = std::move(out.whole);
    }
    REQUIRE(whole);
    CHECK(whole->microbatches == 2);
    CHECK(whole->reports.size() == 1); // from the first chunk, which came last
  }
  SUBCASE("an empty share that claims microbatches") {
    wire::gradient_chunk e;
    e.iteration = 4;
    e.microbatches = 2;
    e.values = {wire::dtype::float32, {0}, nullptr, 0, false, {}};
    CHECK_FALSE(a.add("r1", std::move(e)).error.empty());
  }
  for (std::size_t i = 1; i < r2.size(); ++i) {
    auto out = a.add("r2", std::move(r2[i]));
    CHECK(out.error.empty());
    if (i + 1 == r2.size()) {
      REQUIRE(out.whole);
      CHECK(values_of(*out.whole) == v);
    }
  }
}

TEST_CASE("share assembly: memory is bounded per peer, a share sent again replaces the one under way") {
  auto v = ramp(1000, 5);
  share_assembler a{1000, 2, 100};
  for (std::uint64_t i = 10; i < 20; ++i) // a peer starts ten shares and finishes none
    CHECK(a.add("r1", std::move(cut_share(share_of(i, v), 100)[0])).error.empty());
  CHECK(a.pending() == 2); // the two newest
  CHECK(a.pending_bytes() == 2 * 1000 * sizeof(float));
  // The oldest were dropped: iteration 18's share still completes.
  auto p = cut_share(share_of(18, v), 100);
  std::optional<wire::gradient_chunk> whole;
  for (auto& c : p) {
    auto out = a.add("r1", std::move(c)); // offset 0 starts iteration 18 again (a repaired share)
    CHECK(out.error.empty());
    if (out.whole)
      whole = std::move(out.whole);
  }
  REQUIRE(whole);
  CHECK(values_of(*whole) == v);
  a.forget_before(19);
  CHECK(a.pending() == 1); // 19
  a.forget("r1");
  CHECK(a.pending() == 0);
}

namespace {

// `v` encoded as training.share_compression `how` sends it; `v` becomes what receivers decode.
wire::gradient_chunk encoded_share_of(model::share_compression how, std::vector<float>& v) {
  auto c = share_of(7, v);
  auto e = model::encode_share(how, v.data(), v.size());
  auto type = how == model::share_compression::bf16 ? wire::dtype::bfloat16 : wire::dtype::int8;
  c.values = wire::tensor_payload::copy_of(type, {static_cast<std::int64_t>(v.size())}, e.bytes.data(), e.bytes.size());
  c.scales = e.scales;
  return c;
}

} // namespace

TEST_CASE("share assembly: bf16 and int8 shares are cut at blocks and decoded into one float32 share, in any order") {
  for (auto how : {model::share_compression::bf16, model::share_compression::int8}) {
    for (unsigned seed : {1u, 2u}) {
      INFO("encoding " << static_cast<int>(how) << ", seed " << seed);
      std::mt19937 rng{seed};
      auto n = 1000 + rng() % 5000;
      auto v = ramp(n, seed);
      auto whole = encoded_share_of(how, v);
      auto pieces = cut_share(whole, 300); // int8: 256 values a chunk, two whole blocks
      for (auto& p : pieces) {
        CHECK(p.values.type == whole.values.type);
        if (how == model::share_compression::int8) {
          CHECK(p.offset % 128 == 0);
          CHECK(p.scales.size() == model::share_int8_blocks(static_cast<std::size_t>(p.values.shape[0])));
        } else {
          CHECK(p.scales.empty());
        }
      }
      std::shuffle(pieces.begin(), pieces.end(), rng);
      share_assembler a{n};
      std::optional<wire::gradient_chunk> got;
      for (auto& p : pieces) {
        auto o = a.add("r1", std::move(p));
        REQUIRE(o.error.empty());
        if (o.whole)
          got = std::move(o.whole);
      }
      REQUIRE(got.has_value());
      CHECK(got->values.type == wire::dtype::float32);
      CHECK(got->scales.empty());
      CHECK(values_of(*got) == v); // what the sender averages too
      CHECK(a.pending_bytes() == 0);
      // Whole in one frame: decoded all the same.
      share_assembler one{n};
      auto o = one.add("r1", encoded_share_of(how, v));
      REQUIRE(o.whole.has_value());
      CHECK(values_of(*o.whole) == v);
    }
  }
}

TEST_CASE("share assembly: an int8 chunk without its scales or off a block is refused") {
  auto v = ramp(1000, 4);
  auto whole = encoded_share_of(model::share_compression::int8, v);
  auto pieces = cut_share(whole, 256);
  REQUIRE(pieces.size() == 4);
  share_assembler a{1000};
  auto missing = pieces[1];
  missing.scales.pop_back();
  auto o = a.add("r1", std::move(missing));
  CHECK_FALSE(o.whole);
  CHECK(o.error.find("int8: with a scale per block of 128 values") != std::string::npos);
  auto shifted = pieces[1];
  shifted.offset += 1;
  CHECK(a.add("r1", std::move(shifted)).error.find("from a block's start") != std::string::npos);
  auto other = ramp(1000, 5);
  auto scaled_bf16 = encoded_share_of(model::share_compression::bf16, other);
  scaled_bf16.scales = {1.0f};
  CHECK_FALSE(a.add("r2", std::move(scaled_bf16)).error.empty());
  // The refused chunks changed nothing: the share still comes together.
  std::optional<wire::gradient_chunk> got;
  for (auto& p : pieces)
    if (auto r = a.add("r1", std::move(p)); r.whole)
      got = std::move(r.whole);
  REQUIRE(got.has_value());
  CHECK(values_of(*got) == v);
}

TEST_CASE("share assembly: exact int64 shares come back whole bit for bit, and neither kind takes the other's chunks") {
  const std::uint64_t total = 3000;
  std::vector<std::int64_t> exact(total);
  std::mt19937_64 rng(9); // seed 9
  for (auto& v : exact)
    v = static_cast<std::int64_t>(rng()); // every bit pattern: nothing may pass through a float
  std::vector<float> floats(total, 0.5f);
  auto whole = share_of(4, floats);
  whole.values = wire::tensor_payload::copy_of(wire::dtype::int64, {static_cast<std::int64_t>(total)}, exact.data(),
                                               total * sizeof(std::int64_t));
  auto pieces = cut_share(whole, 1024);
  REQUIRE(pieces.size() == 3);
  CHECK(pieces[1].values.size == 1024 * sizeof(std::int64_t));

  share_assembler plain(total);
  auto refused = plain.add("r1", wire::gradient_chunk{pieces[0]});
  CHECK(refused.error == "a gradient chunk of int64 values; this stage averages float shares "
                         "(training.reproducible_sums differs)");
  share_assembler in(total, 2, 256, true);
  auto wrong = in.add("r1", share_of(4, floats));
  CHECK(wrong.error == "a gradient chunk of float values; this stage averages exact int64 sums "
                       "(training.reproducible_sums differs)");
  std::optional<wire::gradient_chunk> done;
  for (auto it = pieces.rbegin(); it != pieces.rend(); ++it) {
    auto out = in.add("r1", std::move(*it));
    CHECK(out.error.empty());
    if (out.whole)
      done = std::move(out.whole);
  }
  REQUIRE(done);
  CHECK(done->values.type == wire::dtype::int64);
  REQUIRE(done->values.size == total * sizeof(std::int64_t));
  CHECK(std::memcmp(done->values.bytes.get(), exact.data(), done->values.size) == 0);
  CHECK(in.pending() == 0);
  // One chunk for the whole share passes through as it came.
  auto one = in.add("r1", std::move(whole));
  REQUIRE(one.whole);
  CHECK(one.whole->values.type == wire::dtype::int64);
  CHECK(std::memcmp(one.whole->values.bytes.get(), exact.data(), total * sizeof(std::int64_t)) == 0);
}

TEST_CASE("share admission: a stage-mate's chunk counts for the iteration in progress and the next only") {
  CHECK(admit_share(7, 7, false) == share_admission::take);
  CHECK(admit_share(8, 7, false) == share_admission::take);     // a stage-mate one ahead
  CHECK(admit_share(9, 7, false) == share_admission::too_far);  // no stage-mate is two ahead
  CHECK(admit_share(7 + 1'000'000, 7, false) == share_admission::too_far);
  CHECK(admit_share(6, 7, false) == share_admission::stale);
  CHECK(admit_share(7, 7, true) == share_admission::stale);     // averaged already
  CHECK(admit_share(0, 0, false) == share_admission::take);
  CHECK(admit_share(~std::uint64_t{0}, ~std::uint64_t{0} - 1, false) == share_admission::take); // no wrap at the top
  // training.averaging overlap: the iteration before `current` stays open until its step.
  CHECK(admit_share(6, 6, 7, false) == share_admission::take);
  CHECK(admit_share(6, 6, 7, true) == share_admission::stale);
  CHECK(admit_share(5, 6, 7, false) == share_admission::stale);
  CHECK(admit_share(8, 6, 7, false) == share_admission::take);
  CHECK(admit_share(9, 6, 7, false) == share_admission::too_far);
}
