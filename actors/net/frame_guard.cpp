#include "actors/net/frame_guard.hpp"

#include <algorithm>

namespace gwtf::actors {

std::string frame_guard::feed(const std::uint8_t* data, std::size_t n) {
  while (n > 0 && error_.empty()) {
    if (payload_left_ > 0) {
      auto k = static_cast<std::size_t>(std::min<std::uint64_t>(payload_left_, n));
      payload_left_ -= k;
      data += k;
      n -= k;
      continue;
    }
    auto k = std::min(header_bytes - have_, n);
    std::copy(data, data + k, header_ + have_);
    have_ += k;
    data += k;
    n -= k;
    if (have_ < header_bytes)
      break;
    std::uint64_t len = 0;
    for (std::size_t i = 0; i < 4; ++i)
      len = (len << 8) | header_[length_offset + i];
    have_ = 0;
    ++frames_;
    if (len > max_payload_)
      error_ = "a frame announcing " + std::to_string(len) + " bytes (limit " + std::to_string(max_payload_)
               + ", node.max_message_bytes plus framing)";
    payload_left_ = len;
  }
  return error_;
}

} // namespace gwtf::actors
