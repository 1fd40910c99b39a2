// The one wire-format fact that both the share codec (model/share_codec.hpp) and the message
// decoder (messages/) need: int8 gradient shares carry one float32 scale per block of this
// many values, each chunk starting at a block.
#pragma once

#include <cstdint>

namespace gwtf {

inline constexpr std::uint64_t share_int8_block = 128;

} // namespace gwtf
