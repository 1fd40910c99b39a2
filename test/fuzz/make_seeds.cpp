// Writes the fuzzers' seed corpora: every wire message kind (decode/) and a real stage state
// blob (state/). usage: gwtf-fuzz-seeds DIR
#include <filesystem>
#include <fstream>
#include <iostream>

#include "../messages/samples.hpp"
#include "messages/codec.hpp"
#include "state_target.hpp"

namespace fs = std::filesystem;

namespace {
void write(const fs::path& p, const std::vector<std::uint8_t>& bytes) {
  std::ofstream out{p, std::ios::binary};
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}
} // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: gwtf-fuzz-seeds DIR\n";
    return 2;
  }
  fs::path dir{argv[1]};
  fs::create_directories(dir / "decode");
  fs::create_directories(dir / "state");
  for (auto& m : gwtf::test::all_samples())
    write(dir / "decode" / (std::string{gwtf::wire::kind_name(m)} + ".bin"), gwtf::wire::encode(m));
  write(dir / "decode" / "activation-sparse.bin", gwtf::wire::encode(gwtf::test::sample_sparse_activation()));
  write(dir / "state" / "stage1.bin", gwtf::test::fuzz_state_stage().export_state());
  std::cout << "seeds written to " << dir << "\n";
  return 0;
}
