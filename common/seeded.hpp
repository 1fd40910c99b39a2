// Seeded, platform-independent draws (splitmix64): the same numbers on every machine, so a
// seed replays a run exactly. Header-only; no CAF, no LibTorch.
#pragma once

#include <cstdint>

namespace gwtf {

/// splitmix64's output function.
inline std::uint64_t mix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

/// A uniform draw in [0, 1) determined by the seed and two coordinates.
inline double seeded_unit(std::uint64_t seed, std::uint64_t a, std::uint64_t b) {
  return static_cast<double>(mix64(seed ^ mix64(a * 0x100000001b3ULL + b)) >> 11) / 9007199254740992.0;
}

} // namespace gwtf
