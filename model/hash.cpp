#include "model/hash.hpp"

#include <cstring>

namespace gwtf::model {

std::uint64_t fnv1a(const std::uint8_t* data, std::size_t size, std::uint64_t h) {
  for (std::size_t i = 0; i < size; ++i)
    h = (h ^ data[i]) * 1099511628211ULL;
  return h;
}

std::uint64_t fast_hash(const std::uint8_t* data, std::size_t size, std::uint64_t h) {
  // Four independent lanes of 8-byte words keep the multiplier busy (FNV-1a's one byte per
  // dependent multiply made weights_hash 3-4% of a training run's CPU).
  constexpr std::uint64_t prime = 0x9E3779B97F4A7C15ULL;
  std::uint64_t lane[4] = {h, h ^ 0x243F6A8885A308D3ULL, h ^ 0x13198A2E03707344ULL, h ^ 0xA4093822299F31D0ULL};
  std::size_t i = 0;
  for (; i + 32 <= size; i += 32)
    for (int k = 0; k < 4; ++k) {
      std::uint64_t w = 0;
      std::memcpy(&w, data + i + 8 * k, 8);
      lane[k] = (lane[k] ^ w) * prime;
      lane[k] ^= lane[k] >> 29;
    }
  std::uint64_t out = size;
  for (auto l : lane)
    out = (out ^ l) * prime;
  return fnv1a(data + i, size - i, out); // the tail, under 32 bytes
}

} // namespace gwtf::model
