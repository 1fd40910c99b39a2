// Butterfly averaging (actors/core/butterfly.hpp): the parts cover a share at int8 blocks, a
// round over several replicas gives every replica the same sum as the all-to-all exchange, bit
// for bit, and sends about 2(n-1)/n of a share per replica.
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "actors/core/butterfly.hpp"
#include "actors/core/share_assembly.hpp"
#include "common/share_format.hpp"
#include "doctest/doctest.h"

using namespace gwtf;
using namespace gwtf::actors;

namespace {

wire::tensor_payload floats(const float* v, std::size_t n) {
  return wire::tensor_payload::copy_of(wire::dtype::float32, {static_cast<std::int64_t>(n)}, v, n * sizeof(float));
}

wire::tensor_payload ints(const std::int64_t* v, std::size_t n) {
  return wire::tensor_payload::copy_of(wire::dtype::int64, {static_cast<std::int64_t>(n)}, v, n * sizeof(std::int64_t));
}

template <class T = float>
std::vector<T> values(const wire::tensor_payload& p) {
  std::vector<T> out(p.size / sizeof(T));
  if (!out.empty())
    std::memcpy(out.data(), p.bytes.get(), p.size);
  return out;
}

} // namespace

TEST_CASE("butterfly: the parts cover the share in order, each from an int8 block, within a block of each other") {
  // (n > blocks: some parts are empty, and they too begin at a block, never at an unaligned end)
  for (std::uint64_t total : {0ull, 1ull, 127ull, 128ull, 129ull, 1000ull, 4096ull, 1'234'567ull})
    for (std::size_t n : {1u, 2u, 3u, 4u, 7u, 16u}) {
      INFO("total " << total << ", " << n << " parts");
      std::uint64_t next = 0, smallest = total, largest = 0;
      for (std::size_t i = 0; i < n; ++i) {
        auto p = butterfly_part(total, n, i);
        CHECK(p.begin == next);
        CHECK(p.end >= p.begin);
        CHECK(p.begin % share_int8_block == 0); // an empty part too: int8 chunks start at a block
        next = p.end;
        smallest = std::min(smallest, p.size());
        largest = std::max(largest, p.size());
      }
      CHECK(next == total);
      CHECK(largest - smallest <= share_int8_block);
    }
  CHECK(butterfly_part(1000, 3, 3).size() == 0); // past the group: nothing
}

TEST_CASE("butterfly: every replica assembles the all-to-all sum bit for bit, and sends about 2(n-1)/n of a share") {
  const std::uint64_t total = 10'000;
  for (std::size_t n : {3u, 4u, 5u}) {
    INFO(n << " replicas");
    std::mt19937 rng(static_cast<unsigned>(n));
    std::normal_distribution<float> d(0.0f, 1.0f);
    std::vector<std::string> group;
    for (std::size_t r = 0; r < n; ++r)
      group.push_back("r" + std::to_string(r));
    std::vector<std::vector<float>> shares(n, std::vector<float>(total));
    share_tag tag;
    for (std::size_t r = 0; r < n; ++r) {
      for (auto& v : shares[r])
        v = d(rng);
      if (r != 1) // r1 counted no microbatch: it shares, but is in no sum
        tag[group[r]] = static_cast<std::int64_t>(r + 2);
    }
    // The all-to-all sum: in replica-name order, the first copied, the others added.
    std::vector<float> expect = shares[0];
    for (std::size_t r = 2; r < n; ++r)
      for (std::size_t k = 0; k < total; ++k)
        expect[k] += shares[r][k];

    std::vector<butterfly_round> rounds;
    for (auto& me : group)
      rounds.emplace_back(group, me, total);
    double sent = 0; // values the replica r0 sends
    for (std::size_t r = 0; r < n; ++r)
      for (std::size_t owner = 0; owner < n; ++owner) {
        auto span = rounds[owner].mine();
        auto count = tag.count(group[r]) ? tag[group[r]] : 0;
        rounds[owner].add_part(group[r], count, floats(shares[r].data() + span.begin, span.size()));
        if (r == 0 && owner != 0)
          sent += static_cast<double>(span.size());
      }
    share_tag wrong = tag;
    wrong.begin()->second += 1;
    CHECK_FALSE(rounds[0].reduce(wrong)); // a count that is not the part's: not summed
    for (std::size_t owner = 0; owner < n; ++owner) {
      auto sum = rounds[owner].reduce(tag);
      REQUIRE(sum);
      CHECK(values(*sum).size() == rounds[owner].mine().size());
      for (std::size_t r = 0; r < n; ++r) {
        if (r != owner)
          CHECK_FALSE(rounds[r].assemble(tag)); // not every part's sum is in yet
        rounds[r].add_reduced(owner, tag, *sum);
        if (owner == 0 && r != 0)
          sent += static_cast<double>(rounds[owner].mine().size());
      }
    }
    for (std::size_t r = 0; r < n; ++r) {
      auto whole = rounds[r].assemble(tag);
      REQUIRE(whole);
      REQUIRE(whole->size == total * sizeof(float));
      CHECK(std::memcmp(whole->bytes.get(), expect.data(), total * sizeof(float)) == 0);
      CHECK_FALSE(rounds[r].assemble(wrong)); // sums over other counts do not make it
    }
    auto bound = 2.0 * static_cast<double>(n - 1) / static_cast<double>(n) * total;
    CHECK(sent <= bound + static_cast<double>(n * share_int8_block));
    CHECK(sent >= bound - static_cast<double>(n * share_int8_block));
  }
}

TEST_CASE("butterfly: a missing part is not summed, and the owner's own part counts like the others") {
  std::vector<std::string> group{"a", "b", "c"};
  butterfly_round round(group, "b", 600);
  CHECK(round.index() == 1);
  CHECK(round.index_of("c") == std::optional<std::size_t>{2});
  CHECK_FALSE(round.index_of("d"));
  auto span = round.mine();
  std::vector<float> ones(span.size(), 1.0f);
  round.add_part("a", 2, floats(ones.data(), ones.size()));
  round.add_part("b", 1, floats(ones.data(), ones.size()));
  share_tag tag{{"a", 2}, {"b", 1}, {"c", 4}};
  CHECK_FALSE(round.reduce(tag));
  round.add_part("c", 4, floats(ones.data(), ones.size()));
  auto sum = round.reduce(tag);
  REQUIRE(sum);
  CHECK(values(*sum).front() == 3.0f);
  CHECK(values(round.reduce({}).value()) == std::vector<float>(span.size(), 0.0f)); // nothing counted: zeros
}

TEST_CASE("butterfly: exact sums (int64) add as integers, and a part of the other type is not summed") {
  std::vector<std::string> group{"a", "b", "c"};
  const std::uint64_t total = 1000;
  std::vector<butterfly_round> rounds;
  for (auto& me : group)
    rounds.emplace_back(group, me, total, wire::dtype::int64);
  std::vector<std::vector<std::int64_t>> shares(3, std::vector<std::int64_t>(total));
  std::mt19937_64 rng(3); // seed 3
  for (auto& sh : shares)
    for (auto& v : sh)
      v = static_cast<std::int64_t>(rng() >> 4) - (std::int64_t{1} << 59); // near int64's edge: no rounding to hide
  share_tag tag{{"a", 1}, {"b", 2}, {"c", 3}};
  for (std::size_t r = 0; r < 3; ++r)
    for (std::size_t owner = 0; owner < 3; ++owner) {
      auto span = rounds[owner].mine();
      rounds[owner].add_part(group[r], tag[group[r]], ints(shares[r].data() + span.begin, span.size()));
    }
  std::vector<float> wrong(rounds[0].mine().size(), 1.0f);
  rounds[0].add_part("a", 1, floats(wrong.data(), wrong.size()));
  CHECK_FALSE(rounds[0].reduce(tag)); // a float part in an exact round
  rounds[0].add_part("a", 1, ints(shares[0].data(), rounds[0].mine().size()));
  for (std::size_t owner = 0; owner < 3; ++owner) {
    auto sum = rounds[owner].reduce(tag);
    REQUIRE(sum);
    CHECK(sum->type == wire::dtype::int64);
    for (auto& r : rounds)
      r.add_reduced(owner, tag, *sum);
  }
  for (auto& r : rounds) {
    auto whole = r.assemble(tag);
    REQUIRE(whole);
    auto got = values<std::int64_t>(*whole);
    REQUIRE(got.size() == total);
    bool all = true;
    for (std::uint64_t k = 0; k < total; ++k)
      all = all && got[k] == shares[0][k] + shares[1][k] + shares[2][k];
    CHECK(all);
  }
}

TEST_CASE("share assembly: a butterfly part in chunks is put together at its span, apart from the whole share") {
  const std::uint64_t total = 4096;
  share_assembler in(total, 2, 256);
  std::vector<float> values(total);
  for (std::size_t k = 0; k < total; ++k)
    values[k] = static_cast<float>(k);
  auto span = butterfly_part(total, 3, 1);
  wire::gradient_chunk part;
  part.iteration = 5;
  part.stage = 1;
  part.contributors = {"r0"};
  part.microbatches = 2;
  part.holders = {{"dh", 2}};
  part.total_elements = total;
  part.offset = span.begin;
  part.group = {"r0", "r1", "r2"};
  part.values = floats(values.data() + span.begin, span.size());
  auto pieces = cut_share(part, 512);
  REQUIRE(pieces.size() == (span.size() + 511) / 512);
  CHECK(pieces.front().offset == span.begin);
  CHECK(pieces.back().group == part.group);
  // A whole share of the same peer and iteration under way meanwhile does not disturb it.
  auto whole = part;
  whole.group.clear();
  whole.offset = 0;
  whole.values = floats(values.data(), 512);
  CHECK_FALSE(in.add("r0", std::move(whole)).whole);
  std::optional<wire::gradient_chunk> done;
  for (auto it = pieces.rbegin(); it != pieces.rend(); ++it) { // any order
    auto out = in.add("r0", std::move(*it), span);
    CHECK(out.error.empty());
    if (out.whole)
      done = std::move(out.whole);
  }
  REQUIRE(done);
  CHECK(done->offset == span.begin);
  REQUIRE(done->values.shape.at(0) == static_cast<std::int64_t>(span.size()));
  CHECK(std::memcmp(done->values.bytes.get(), values.data() + span.begin, span.size() * sizeof(float)) == 0);
  CHECK(in.pending() == 1); // the whole share is still under way

  auto stray = part;
  stray.values = floats(values.data(), 300);
  stray.offset = span.end - 100; // runs past the part
  auto out = in.add("r0", std::move(stray), span);
  CHECK(out.error == "a gradient chunk of 300 values at offset " + std::to_string(span.end - 100) + " in the part ["
                       + std::to_string(span.begin) + ", " + std::to_string(span.end) + ")");
}

