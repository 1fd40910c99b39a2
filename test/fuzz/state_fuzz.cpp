// libFuzzer target: model::stage::import_state, which parses a stage state blob received
// from a replica. A rejected blob must leave the stage unchanged.
#include <cstdlib>

#include "model/stage.hpp"

namespace {

gwtf::model::stage& target() {
  static gwtf::model::stage s = [] {
    gwtf::model::model_config m;
    m.layers = 2;
    m.hidden = 8;
    m.heads = 2;
    m.seq_len = 4;
    m.vocab = 16;
    m.stages = 3;
    return gwtf::model::stage{m, gwtf::model::training_config{}, 1};
  }();
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
