#include "model/partition.hpp"

namespace gwtf::model {

std::vector<stage_span> partition(const model_config& cfg) {
  std::vector<stage_span> spans;
  spans.reserve(static_cast<size_t>(cfg.stages));
  spans.push_back(stage_span{0, 0, 0, true, true});
  int relays = cfg.stages - 1;
  int base = cfg.layers / relays;
  int extra = cfg.layers % relays; // the first `extra` relay stages take one more block
  int next = 0;
  for (int s = 1; s <= relays; ++s) {
    int n = base + (s <= extra ? 1 : 0);
    spans.push_back(stage_span{s, next, next + n, false, false});
    next += n;
  }
  return spans;
}

std::string describe(const stage_span& span) {
  std::string out = "stage " + std::to_string(span.stage) + ": ";
  if (span.entry || span.exit) {
    out += span.entry && span.exit ? "embedding + final norm, LM head, loss"
                                   : (span.entry ? "embedding" : "final norm, LM head, loss");
    if (span.blocks() > 0)
      out += ", ";
  }
  if (span.blocks() == 1)
    out += "block " + std::to_string(span.first_layer);
  else if (span.blocks() > 1)
    out += "blocks " + std::to_string(span.first_layer) + "-" + std::to_string(span.end_layer - 1);
  return out;
}

std::int64_t activation_bytes(const model_config& cfg, int microbatch_size) {
  return static_cast<std::int64_t>(microbatch_size) * cfg.seq_len * cfg.hidden
         * static_cast<std::int64_t>(sizeof(float));
}

} // namespace gwtf::model
