// Checkpoint files (model/checkpoint): format, atomic writes, retention, fallbacks, the cut.
#include <doctest/doctest.h>

#include <chrono>
#include <cstring>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

#include "model/checkpoint.hpp"

using namespace gwtf::model;
namespace fs = std::filesystem;

namespace {

fs::path fresh_dir(const std::string& name) {
  auto d = fs::temp_directory_path() / ("gwtf-ckpt-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

std::vector<std::uint8_t> payload(std::size_t n, std::uint8_t seed) {
  std::vector<std::uint8_t> v(n);
  for (std::size_t i = 0; i < n; ++i)
    v[i] = static_cast<std::uint8_t>(seed + i * 31);
  return v;
}

checkpoint_meta meta_at(std::uint64_t iteration, std::uint32_t stage = 1) {
  return checkpoint_meta{stage, 4, iteration, 0xabcdef, "r1"};
}

std::string error_of(const checked<checkpoint>& c) {
  return std::holds_alternative<std::string>(c) ? std::get<std::string>(c) : std::string{};
}

bool contains(const std::string& text, const std::string& what) { return text.find(what) != std::string::npos; }

} // namespace

TEST_CASE("checkpoint format: round trip, and every truncation or flipped byte is refused") {
  auto state = payload(1000, 7);
  auto bytes = encode_checkpoint(meta_at(12), state);
  auto ok = decode_checkpoint(bytes.data(), bytes.size());
  REQUIRE(std::holds_alternative<checkpoint>(ok));
  auto& c = std::get<checkpoint>(ok);
  CHECK(c.meta.iteration == 12);
  CHECK(c.meta.stage == 1);
  CHECK(c.meta.stages == 4);
  CHECK(c.meta.config_hash == 0xabcdef);
  CHECK(c.meta.host == "r1");
  CHECK(c.state == state);
  for (std::size_t n = 0; n < bytes.size(); n += 37)
    CHECK_MESSAGE(!error_of(decode_checkpoint(bytes.data(), n)).empty(), "truncated to " << n);
  for (std::size_t i = 0; i < bytes.size(); i += 53) {
    auto bad = bytes;
    bad[i] ^= 0x10;
    CHECK_MESSAGE(!error_of(decode_checkpoint(bad.data(), bad.size())).empty(), "byte " << i << " flipped");
  }
  auto other = bytes;
  other[0] = 'X';
  CHECK(contains(error_of(decode_checkpoint(other.data(), other.size())), "bad magic"));
}

TEST_CASE("checkpoint files: atomic writes keep the newest N, an older one serves when the newest is damaged") {
  auto root = fresh_dir("keep").string();
  for (std::uint64_t i : {2, 4, 6, 8})
    REQUIRE(write_checkpoint(root, meta_at(i), payload(500, static_cast<std::uint8_t>(i)), 3).empty());
  CHECK(checkpoint_iterations(root, 1) == std::vector<std::uint64_t>{4, 6, 8});
  CHECK(checkpoint_iterations(root, 2).empty());
  std::vector<std::string> skipped;
  auto newest = load_checkpoint(root, 1, 0xabcdef, std::nullopt, skipped);
  REQUIRE(std::holds_alternative<checkpoint>(newest));
  CHECK(std::get<checkpoint>(newest).meta.iteration == 8);
  CHECK(skipped.empty());
  // Truncate the newest, corrupt the next: the oldest serves, with a line for each.
  fs::resize_file(checkpoint_path(root, 1, 8), 300);
  {
    std::fstream f{checkpoint_path(root, 1, 6), std::ios::in | std::ios::out | std::ios::binary};
    f.seekp(200);
    f.put('\x55');
  }
  auto older = load_checkpoint(root, 1, 0xabcdef, std::nullopt, skipped);
  REQUIRE(std::holds_alternative<checkpoint>(older));
  CHECK(std::get<checkpoint>(older).meta.iteration == 4);
  CHECK(std::get<checkpoint>(older).state == payload(500, 4));
  REQUIRE(skipped.size() == 2);
  CHECK(contains(skipped[0], "iteration-0000000008.ckpt"));
  CHECK(contains(skipped[0], "truncated"));
  CHECK(contains(skipped[1], "content hash mismatch"));
  // Another config, an exact iteration that is missing, another stage's file under this name.
  auto wrong = load_checkpoint(root, 1, 0x1234, 4, skipped);
  CHECK(contains(error_of(wrong), "written for config 0000000000abcdef, this cluster is 0000000000001234"));
  CHECK(contains(error_of(load_checkpoint(root, 1, 0xabcdef, 5, skipped)), "no checkpoint of stage 1 at iteration 5"));
  fs::create_directories(fs::path{root} / "stage-2");
  fs::copy_file(checkpoint_path(root, 1, 4), checkpoint_path(root, 2, 4));
  CHECK(contains(error_of(load_checkpoint(root, 2, 0xabcdef, 4, skipped)), "holds stage 1, expected stage 2"));
  CHECK(contains(error_of(load_checkpoint(root, 3, 0xabcdef, std::nullopt, skipped)), "(none written)"));
  fs::remove_all(root);
}

TEST_CASE("checkpoint files: a writer killed with SIGKILL mid-write leaves the previous checkpoint usable") {
  auto root = fresh_dir("kill").string();
  REQUIRE(write_checkpoint(root, meta_at(10), payload(4096, 1), 3).empty());
  pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    // Large enough that the write is still going when the parent kills it.
    std::vector<std::uint8_t> big(512u << 20, 0x5a);
    write_checkpoint(root, meta_at(20), big, 3);
    ::_exit(0);
  }
  auto tmp = checkpoint_path(root, 1, 20) + ".tmp." + std::to_string(child);
  // Wait (bounded) until the child is writing its temporary file, then kill it.
  bool seen = false;
  for (int i = 0; i < 20000 && !seen; ++i) {
    std::error_code ec;
    seen = fs::exists(tmp, ec) && fs::file_size(tmp, ec) > 0;
    if (!seen)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ::kill(child, SIGKILL);
  int status = 0;
  ::waitpid(child, &status, 0);
  REQUIRE(seen);
  REQUIRE(WIFSIGNALED(status));
  CHECK(checkpoint_iterations(root, 1) == std::vector<std::uint64_t>{10});
  std::vector<std::string> skipped;
  auto c = load_checkpoint(root, 1, 0xabcdef, std::nullopt, skipped);
  REQUIRE(std::holds_alternative<checkpoint>(c));
  CHECK(std::get<checkpoint>(c).meta.iteration == 10);
  // The next write removes what the killed writer left.
  REQUIRE(write_checkpoint(root, meta_at(30), payload(64, 3), 3).empty());
  CHECK_FALSE(fs::exists(tmp));
  CHECK(checkpoint_iterations(root, 1) == std::vector<std::uint64_t>{10, 30});
  fs::remove_all(root);
}

TEST_CASE("state blob description: what a peer sends is refused unless whole") {
  CHECK(std::get<std::string>(describe_state_blob({})) == "0 bytes: shorter than a stage state's header");
  std::vector<std::uint8_t> junk(100, 0x41);
  CHECK(std::get<std::string>(describe_state_blob(junk)) == "not a stage state (bad magic)");
  std::memcpy(junk.data(), "GWTFSTGE", 8);
  CHECK(std::get<std::string>(describe_state_blob(junk)) == "stage state: content hash mismatch");
}

TEST_CASE("consistent cut: the newest iteration every stage has") {
  CHECK(consistent_cut({{4, 6, 8}, {6, 8}, {2, 4, 6}}) == std::optional<std::uint64_t>{6});
  CHECK(consistent_cut({{4, 6, 8}, {8}, {8, 10}}) == std::optional<std::uint64_t>{8});
  CHECK_FALSE(consistent_cut({{4}, {6}}).has_value());
  CHECK_FALSE(consistent_cut({{4}, {}}).has_value());
  CHECK_FALSE(consistent_cut({}).has_value());
}
