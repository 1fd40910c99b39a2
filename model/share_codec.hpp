// How a replica's gradient share travels between the replicas of a stage
// (training.share_compression) and when the averaged update lands (training.averaging):
// the choices and the bytes each puts on the wire, one home for both the trainer and the
// simulator. Pure; no LibTorch. docs/runtime.md, "Shares in chunks"; docs/simulator.md.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <utility>

namespace gwtf::model {

/// How shares' values are encoded on the wire.
enum class share_compression {
  fp32, ///< 4 bytes a value, exact
  bf16, ///< 2 bytes a value (bfloat16, round to nearest even)
  int8, ///< 1 byte a value plus one float32 scale per share_int8_block values, with error feedback
};

constexpr std::array<std::pair<share_compression, const char*>, 3> enum_names(share_compression) {
  return {{{share_compression::fp32, "fp32"}, {share_compression::bf16, "bf16"}, {share_compression::int8, "int8"}}};
}

/// When the averaged gradient is applied.
enum class averaging_mode {
  sync,    ///< the next iteration starts once the update is applied
  overlap, ///< the next iteration starts on the weights before the update, which lands during it
};

constexpr std::array<std::pair<averaging_mode, const char*>, 2> enum_names(averaging_mode) {
  return {{{averaging_mode::sync, "sync"}, {averaging_mode::overlap, "overlap"}}};
}

/// Values per int8 block: each block has its own scale (its largest magnitude / 127).
inline constexpr std::uint64_t share_int8_block = 128;

/// Bytes `values` share values take on the wire under `c` (the values only, no headers).
inline double share_wire_bytes(share_compression c, double values) {
  switch (c) {
    case share_compression::fp32:
      return 4 * values;
    case share_compression::bf16:
      return 2 * values;
    case share_compression::int8:
      return values + 4 * std::ceil(values / static_cast<double>(share_int8_block));
  }
  return 4 * values;
}

} // namespace gwtf::model
