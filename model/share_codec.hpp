// How a replica's gradient share travels between the replicas of a stage
// (training.share_compression) and when the averaged update lands (training.averaging):
// the choices and the bytes each puts on the wire, one home for both the trainer and the
// simulator. Pure; no LibTorch. docs/runtime.md, "Shares in chunks"; docs/simulator.md.
#pragma once

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "common/share_format.hpp"

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

/// How the replicas of a stage exchange their shares (docs/runtime.md, "Butterfly averaging").
enum class share_exchange {
  butterfly,  ///< reduce-scatter + all-gather from 3 replicas on: about 2(n-1)/n of a share per replica
  all_to_all, ///< every replica sends its whole share to every other: n-1 shares per replica
};

constexpr std::array<std::pair<share_exchange, const char*>, 2> enum_names(share_exchange) {
  return {{{share_exchange::butterfly, "butterfly"}, {share_exchange::all_to_all, "all_to_all"}}};
}

/// When the averaged gradient is applied.
enum class averaging_mode {
  sync,    ///< the next iteration starts once the update is applied
  overlap, ///< the next iteration starts on the weights before the update, which lands during it
};

constexpr std::array<std::pair<averaging_mode, const char*>, 2> enum_names(averaging_mode) {
  return {{{averaging_mode::sync, "sync"}, {averaging_mode::overlap, "overlap"}}};
}

/// How a replica adds its microbatches' parameter gradients (training.reproducible_sums;
/// docs/model.md, "Reproducible sums").
enum class sum_order {
  off,       ///< as they arrive: one float32 running sum per data holder
  key_order, ///< each microbatch's kept apart, added in microbatch-key order at the averaging point
  exact,     ///< each rounded once onto a fixed grid and added as integers (int64 shares, exact)
};

constexpr std::array<std::pair<sum_order, const char*>, 3> enum_names(sum_order) {
  return {{{sum_order::off, "off"}, {sum_order::key_order, "key_order"}, {sum_order::exact, "exact"}}};
}

/// Exact sums' grid: a microbatch's gradient entry g becomes the integer round(g * 2^40),
/// clamped to +-2^45 (|g| <= 32). A stage adds at most exact_sum_max_microbatches of them
/// (each at most twice: the double_count seam), so no sum leaves int64: 2^45 * 2^17 = 2^62.
inline constexpr int exact_sum_fraction_bits = 40;
inline constexpr int exact_sum_clamp_bits = 45;
inline constexpr std::uint64_t exact_sum_max_microbatches = 65536;

/// Values per int8 block: each block has its own scale (its largest magnitude / 127).
using gwtf::share_int8_block;

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

/// The int8 blocks (scales) that `values` values take.
inline std::size_t share_int8_blocks(std::size_t values) {
  return (values + share_int8_block - 1) / share_int8_block;
}

/// One share's values as they go on the wire.
struct encoded_share {
  share_compression how = share_compression::fp32;
  std::vector<std::uint8_t> bytes; ///< 4, 2 or 1 byte a value, little-endian
  std::vector<float> scales;       ///< int8: one per block of share_int8_block values
};

/// Encodes `n` values. With `residual` (int8's error feedback: n values, what earlier
/// encodings lost), the residual is added first and replaced by what this encoding loses.
/// `values` is overwritten with what a receiver decodes, so that the sender averages exactly
/// what its peers do. bf16 rounds to nearest even; int8 scales each block by its largest
/// magnitude / 127 and rounds to nearest (a block of zeros has scale 0).
encoded_share encode_share(share_compression how, float* values, std::size_t n, std::vector<float>* residual = nullptr);

/// Decodes `n` values of `how` from `bytes` (int8: with `scales`, one per block, the first
/// block starting at the first value) into `out`.
void decode_share(share_compression how, const std::uint8_t* bytes, const float* scales, std::size_t n, float* out);

} // namespace gwtf::model
