// The limits of a valid message (docs/wire.md): what the decoder (decode.cpp), the security
// boundary, accepts of a field before it reads it.
#pragma once

#include <cstddef>
#include <cstdint>

namespace gwtf::wire::limit {

constexpr std::size_t max_id = 64;          // host / data holder names
constexpr std::size_t max_address = 255;
constexpr std::size_t max_query = 1024;
constexpr std::size_t max_text = 1u << 20;  // free text: reasons, inspection bodies
constexpr std::size_t max_path = 1024;
constexpr std::size_t max_peers = 4096;     // gossip entries, contributors, replicas, costs
constexpr std::size_t max_flows = 65536;
constexpr std::size_t max_dims = 8;
constexpr std::int32_t max_stage = 1023;
constexpr std::uint32_t max_capacity = 1'000'000;

} // namespace gwtf::wire::limit
