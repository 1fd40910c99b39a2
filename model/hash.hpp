// Content hashes of byte ranges (no LibTorch): state blobs, weights, checkpoint files.
#pragma once

#include <cstddef>
#include <cstdint>

namespace gwtf::model {

/// FNV-1a 64 over bytes (the state blob's integrity hash).
std::uint64_t fnv1a(const std::uint8_t* data, std::size_t size, std::uint64_t h = 1469598103934665603ULL);
/// A faster 64-bit content hash (4 lanes of 8-byte words, FNV-1a for the tail): weights_hash.
/// Not cryptographic; every bit of the input reaches the result.
std::uint64_t fast_hash(const std::uint8_t* data, std::size_t size, std::uint64_t h = 1469598103934665603ULL);

} // namespace gwtf::model
