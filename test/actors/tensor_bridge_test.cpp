// LibTorch tensor -> wire -> LibTorch tensor: equal values, and no copy outside the wire
// layer's single one (none at all with a handed-over frame).
#include <torch/types.h>

#include <doctest/doctest.h> // after torch headers: glog redefines CHECK (toolchain.md)

#include "actors/compute/tensor_bridge.hpp"
#include "messages/codec.hpp"

using namespace gwtf;

TEST_CASE("tensor bridge: to_payload and to_torch view the same memory") {
  auto t = torch::arange(24, torch::kFloat32).reshape({2, 3, 4});
  auto p = actors::to_payload(t);
  CHECK(p.bytes.get() == static_cast<const std::uint8_t*>(t.data_ptr()));
  CHECK(p.size == 24 * sizeof(float));
  CHECK(p.shape == std::vector<std::int64_t>{2, 3, 4});
  auto back = actors::to_torch(p);
  CHECK(back.data_ptr() == t.data_ptr());
  CHECK(torch::equal(back, t));
}

TEST_CASE("tensor bridge: an activation crosses the wire with one copy in all") {
  auto t = torch::randn({4, 16, 32});
  wire::activation a;
  a.path = {"dh"};
  a.tensor = actors::to_payload(t); // no copy
  auto frame = std::make_shared<const std::vector<std::uint8_t>>(wire::encode(wire::message{a})); // the copy
  auto r = wire::decode(frame); // no copy: the payload points into the frame
  REQUIRE(std::holds_alternative<wire::message>(r));
  auto received = actors::to_torch(std::get<wire::activation>(std::get<wire::message>(r)).tensor); // no copy
  auto* p = static_cast<const std::uint8_t*>(received.data_ptr());
  CHECK(p >= frame->data());
  CHECK(p < frame->data() + frame->size());
  frame.reset(); // the tensor keeps the frame alive
  CHECK(torch::equal(received, t));
  // Non-contiguous tensors are made contiguous once, on the sending side.
  auto transposed = t.transpose(0, 2);
  CHECK(torch::equal(actors::to_torch(actors::to_payload(transposed)), transposed.contiguous()));
}
