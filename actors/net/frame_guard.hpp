// The size check CAF 0.17 lacks: its BASP transport trusts the 32-bit payload length of
// every frame header and allocates (and zeroes) that much before reading a byte of it, so a
// 32-byte header from anyone who can reach the port costs up to 4 GiB. In node mode the
// listen port is served by a guard (actors/net/net_guard.cpp) that relays each connection to
// the middleman and runs this pure parser over the inbound bytes: a header announcing more
// than the limit ends the connection before the middleman sees it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace gwtf::actors {

/// Follows BASP frame boundaries in one inbound byte stream.
class frame_guard {
public:
  /// BASP header: operation, 2 padding bytes, flags, payload length (u32, network order),
  /// operation data (u64), source and destination actor ids (u64 each).
  static constexpr std::size_t header_bytes = 32;
  static constexpr std::size_t length_offset = 4;

  /// `max_payload`: the largest payload a frame may announce.
  explicit frame_guard(std::uint64_t max_payload) : max_payload_(max_payload) {}

  /// Takes the next `n` bytes of the stream. Returns an empty string while the stream is
  /// acceptable, else why not (the connection must be closed; later calls keep failing).
  std::string feed(const std::uint8_t* data, std::size_t n);

  std::uint64_t frames() const { return frames_; } ///< complete headers seen so far

private:
  std::uint64_t max_payload_;
  std::uint8_t header_[header_bytes] = {};
  std::size_t have_ = 0;        // bytes of the current header
  std::uint64_t payload_left_ = 0;
  std::uint64_t frames_ = 0;
  std::string error_;
};

} // namespace gwtf::actors
