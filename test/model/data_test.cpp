#include <doctest/doctest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <unistd.h>

#include "model/data.hpp"

using namespace gwtf::model;
namespace fs = std::filesystem;

namespace {

// A file in a fresh temporary directory, removed at scope exit.
struct temp_file {
  fs::path path;
  explicit temp_file(const std::vector<std::uint8_t>& bytes) {
    path = fs::temp_directory_path() / ("gwtf-data-" + std::to_string(::getpid()) + "-"
                                        + std::to_string(counter()++));
    std::ofstream out{path, std::ios::binary};
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  }
  ~temp_file() { fs::remove(path); }
  static int& counter() {
    static int n = 0;
    return n;
  }
};

data_config cfg(const fs::path& p, data_format f) {
  data_config d;
  d.path = p.string();
  d.format = f;
  return d;
}

std::string error_of(const std::variant<corpus, std::string>& r) {
  REQUIRE(std::holds_alternative<std::string>(r));
  return std::get<std::string>(r);
}

} // namespace

TEST_CASE("corpus: nanoGPT tokens are little-endian uint16") {
  // ids 1, 258, 65535 ... repeated
  std::vector<std::uint8_t> bytes;
  for (int k = 0; k < 10; ++k)
    for (std::uint16_t v : {std::uint16_t{1}, std::uint16_t{258}, std::uint16_t{65535}}) {
      bytes.push_back(static_cast<std::uint8_t>(v & 0xff));
      bytes.push_back(static_cast<std::uint8_t>(v >> 8));
    }
  temp_file f{bytes};
  auto r = corpus::open(cfg(f.path, data_format::tokens), 65536, 4);
  REQUIRE(std::holds_alternative<corpus>(r));
  auto& c = std::get<corpus>(r);
  CHECK(c.size() == 30);
  CHECK(c.at(0) == 1);
  CHECK(c.at(1) == 258);
  CHECK(c.at(2) == 65535);
}

TEST_CASE("corpus: bad files are rejected with the reason") {
  temp_file odd{std::vector<std::uint8_t>(11, 1)};
  CHECK(error_of(corpus::open(cfg(odd.path, data_format::tokens), 256, 2)).find("not a whole number of uint16 tokens") != std::string::npos);
  temp_file big_id{{1, 0, 2, 0, 0, 1, 3, 0, 4, 0, 5, 0}}; // third id = 256
  CHECK(error_of(corpus::open(cfg(big_id.path, data_format::tokens), 256, 2)).find("token 256 at position 2 is not below model.vocab = 256") != std::string::npos);
  temp_file tiny{std::vector<std::uint8_t>(5, 'a')};
  CHECK(error_of(corpus::open(cfg(tiny.path, data_format::text), 256, 8)).find("need at least seq_len + 2 = 10") != std::string::npos);
  CHECK(error_of(corpus::open(cfg("/no/such/corpus", data_format::text), 256, 8)).find("cannot open") != std::string::npos);
}

TEST_CASE("sampling: a microbatch depends only on (seed, holder, iteration, index)") {
  std::vector<std::uint8_t> bytes(5000);
  for (std::size_t i = 0; i < bytes.size(); ++i)
    bytes[i] = static_cast<std::uint8_t>((i * 7 + i / 13) % 251);
  temp_file f{bytes};
  auto c = std::get<corpus>(corpus::open(cfg(f.path, data_format::text), 256, 16));
  microbatch_id id{12, 1, 3};
  auto a = sample(c, 42, id, 4, 16);
  auto b = sample(c, 42, id, 4, 16);
  CHECK(a.rows == 4);
  CHECK(a.cols == 17);
  CHECK(a.tokens == b.tokens);
  // Each row is a contiguous window of the corpus.
  for (int r = 0; r < a.rows; ++r) {
    bool found = false;
    for (std::size_t s = 0; s + 17 <= c.size() && !found; ++s) {
      bool same = true;
      for (int k = 0; k < 17 && same; ++k)
        same = c.at(s + static_cast<std::size_t>(k)) == a.tokens[static_cast<std::size_t>(r * 17 + k)];
      found = same;
    }
    CHECK(found);
  }
  // Any change of seed, holder, iteration or index draws other sequences.
  std::set<std::vector<std::int32_t>> seen{a.tokens};
  seen.insert(sample(c, 43, id, 4, 16).tokens);
  seen.insert(sample(c, 42, microbatch_id{13, 1, 3}, 4, 16).tokens);
  seen.insert(sample(c, 42, microbatch_id{12, 0, 3}, 4, 16).tokens);
  seen.insert(sample(c, 42, microbatch_id{12, 1, 2}, 4, 16).tokens);
  CHECK(seen.size() == 5);
}

TEST_CASE("microbatch keys are unique within their documented ranges") {
  std::set<std::uint64_t> keys;
  for (std::uint64_t it : {0ULL, 1ULL, (1ULL << 40) - 1})
    for (std::uint32_t h : {0u, 1u, 4095u})
      for (std::uint32_t i : {0u, 1u, 4095u})
        keys.insert(microbatch_id{it, h, i}.key());
  CHECK(keys.size() == 27);
}
