// LibTorch tensors as raw bytes and back, without copies: the bridge between model/ and
// whatever moves bytes (the wire codec). Knows nothing of the wire format.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include <torch/types.h>

namespace gwtf::model {

/// Element types that cross hosts (same order as the wire's DType).
enum class element_type : std::uint8_t { float32, float16, bfloat16, int64, int32, int8 };

/// A tensor's bytes, kept alive by `owner`.
struct tensor_bytes {
  element_type type = element_type::float32;
  std::vector<std::int64_t> shape;
  std::shared_ptr<const void> owner;
  const void* data = nullptr;
  std::size_t size = 0;
};

/// Views `bytes` as a tensor without copying; the tensor keeps the owner alive. The data
/// must be aligned for the element type and hold product(shape) elements.
torch::Tensor as_tensor(const tensor_bytes& bytes);

/// The bytes of `t` without copying when it is contiguous on the CPU (one copy otherwise);
/// the result keeps the tensor's storage alive. Fails for other element types.
tensor_bytes bytes_of(const torch::Tensor& t);

} // namespace gwtf::model
