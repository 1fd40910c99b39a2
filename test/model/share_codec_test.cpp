// Gradient shares on the wire (training.share_compression): what each encoding keeps, and
// int8's error feedback, which keeps what rounding loses for the next share.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "model/share_codec.hpp"

using namespace gwtf::model;

TEST_CASE("share codec: fp32 is exact, bf16 rounds to nearest even, and the sender keeps what receivers decode") {
  std::vector<float> v{1.0f, -2.5f, 1.0f + 1.0f / 256, 1.0f + 3.0f / 256, 3.14159265f, 0.0f};
  auto exact = v;
  auto e = encode_share(share_compression::fp32, exact.data(), exact.size());
  CHECK(e.bytes.size() == 4 * v.size());
  CHECK(exact == v);
  auto b = v;
  auto h = encode_share(share_compression::bf16, b.data(), b.size());
  REQUIRE(h.bytes.size() == 2 * v.size());
  CHECK(b[0] == 1.0f);
  CHECK(b[1] == -2.5f);
  CHECK(b[2] == 1.0f);                  // halfway (8 bits of mantissa): to the even neighbour
  CHECK(b[3] == 1.0f + 4.0f / 256);     // halfway, the odd neighbour rounds up
  CHECK(std::fabs(b[4] - 3.14159265f) <= 3.14159265f / 256);
  std::vector<float> decoded(v.size());
  decode_share(share_compression::bf16, h.bytes.data(), nullptr, v.size(), decoded.data());
  CHECK(decoded == b);
  CHECK(share_wire_bytes(share_compression::bf16, 1000) == 2000);
}

TEST_CASE("share codec: int8 scales each block of 128 by its largest magnitude, within half a step of the value") {
  std::vector<float> v(300);
  for (std::size_t k = 0; k < v.size(); ++k)
    v[k] = static_cast<float>(std::sin(0.37 * static_cast<double>(k)) * (k < 128 ? 1.0 : k < 256 ? 0.01 : 0.0));
  auto q = v;
  auto e = encode_share(share_compression::int8, q.data(), q.size());
  REQUIRE(e.bytes.size() == 300);
  REQUIRE(e.scales.size() == 3);
  CHECK(share_wire_bytes(share_compression::int8, 300) == 300 + 4 * 3);
  CHECK(e.scales[2] == 0.0f); // a block of zeros
  for (std::size_t k = 0; k < v.size(); ++k) {
    INFO("value " << k);
    CHECK(std::fabs(q[k] - v[k]) <= e.scales[k / 128] / 2 * (1 + 1e-5f));
  }
  // The largest magnitude of the second block is 0.01: its step is 100 times finer.
  CHECK(e.scales[1] < e.scales[0] / 50);
  // A receiver that gets the values from block 1 on, with their scales, decodes the same.
  std::vector<float> tail(172);
  decode_share(share_compression::int8, e.bytes.data() + 128, e.scales.data() + 1, tail.size(), tail.data());
  for (std::size_t k = 0; k < tail.size(); ++k)
    CHECK(tail[k] == q[128 + k]);
}

TEST_CASE("share codec: int8 error feedback carries what rounding lost into the next share") {
  // A block with one large value: 0.003 is below half a step (1/254) and rounds to 0 every
  // time. Without feedback 200 shares carry none of it; with feedback their sum is within one
  // step of 200 x 0.003, and the residual never exceeds half a step.
  std::vector<float> residual(2, 0.0f);
  double with = 0, without = 0;
  for (int round = 0; round < 200; ++round) {
    std::vector<float> a{1.0f, 0.003f}, b{1.0f, 0.003f};
    encode_share(share_compression::int8, a.data(), 2, &residual);
    encode_share(share_compression::int8, b.data(), 2);
    with += a[1];
    without += b[1];
    CHECK(std::fabs(residual[1]) <= 1.0f / 254 * 1.01f);
  }
  CHECK(without == 0.0);
  CHECK(std::fabs(with - 200 * 0.003) <= 1.0 / 127);
}
