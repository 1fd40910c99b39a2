#include "model/share_codec.hpp"

#include <algorithm>
#include <cstring>

namespace gwtf::model {

namespace {

std::uint16_t to_bf16(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  if (std::isnan(f))
    return static_cast<std::uint16_t>((u >> 16) | 0x40); // stays a NaN
  u += 0x7FFF + ((u >> 16) & 1);                         // round to nearest even
  return static_cast<std::uint16_t>(u >> 16);
}

float from_bf16(std::uint16_t h) {
  std::uint32_t u = static_cast<std::uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

} // namespace

encoded_share encode_share(share_compression how, float* values, std::size_t n, std::vector<float>* residual) {
  encoded_share out;
  out.how = how;
  bool feedback = residual != nullptr && residual->size() == n;
  if (feedback)
    for (std::size_t k = 0; k < n; ++k)
      values[k] += (*residual)[k];
  switch (how) {
    case share_compression::fp32:
      out.bytes.resize(n * 4);
      std::memcpy(out.bytes.data(), values, n * 4);
      if (feedback)
        std::fill(residual->begin(), residual->end(), 0.0f);
      return out;
    case share_compression::bf16:
      out.bytes.resize(n * 2);
      for (std::size_t k = 0; k < n; ++k) {
        auto h = to_bf16(values[k]);
        std::memcpy(out.bytes.data() + 2 * k, &h, 2);
        float back = from_bf16(h);
        if (feedback)
          (*residual)[k] = values[k] - back;
        values[k] = back;
      }
      return out;
    case share_compression::int8:
      break;
  }
  out.bytes.resize(n);
  out.scales.resize(share_int8_blocks(n));
  for (std::size_t b = 0; b < out.scales.size(); ++b) {
    auto from = b * share_int8_block, to = std::min(n, from + share_int8_block);
    float m = 0;
    for (auto k = from; k < to; ++k)
      m = std::max(m, std::fabs(values[k]));
    float scale = m / 127.0f;
    out.scales[b] = scale;
    for (auto k = from; k < to; ++k) {
      float q = scale > 0 ? std::nearbyint(values[k] / scale) : 0.0f;
      q = std::min(127.0f, std::max(-127.0f, q));
      auto v = static_cast<std::int8_t>(q);
      out.bytes[k] = static_cast<std::uint8_t>(v);
      float back = static_cast<float>(v) * scale;
      if (feedback)
        (*residual)[k] = values[k] - back;
      values[k] = back;
    }
  }
  return out;
}

void decode_share(share_compression how, const std::uint8_t* bytes, const float* scales, std::size_t n, float* out) {
  switch (how) {
    case share_compression::fp32:
      std::memcpy(out, bytes, n * 4);
      return;
    case share_compression::bf16:
      for (std::size_t k = 0; k < n; ++k) {
        std::uint16_t h;
        std::memcpy(&h, bytes + 2 * k, 2);
        out[k] = from_bf16(h);
      }
      return;
    case share_compression::int8:
      for (std::size_t k = 0; k < n; ++k)
        out[k] = static_cast<float>(static_cast<std::int8_t>(bytes[k])) * scales[k / share_int8_block];
      return;
  }
}

} // namespace gwtf::model
