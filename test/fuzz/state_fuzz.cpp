// libFuzzer target: model::stage::import_state, which parses a stage state blob received
// from a replica. A rejected blob must leave the stage unchanged.
#include <cstdlib>

#include "state_target.hpp"

namespace {

gwtf::model::stage& target() {
  static gwtf::model::stage s = gwtf::test::fuzz_state_stage();
  return s;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto& s = target();
  auto before = s.weights_hash();
  auto r = s.import_state(data, size);
  if (std::holds_alternative<std::string>(r) && s.weights_hash() != before)
    std::abort(); // rejected but modified
  return 0;
}
