// Wire tensor payloads <-> LibTorch tensors, with no copy in either direction (the one copy
// of a received tensor happens in the codec, or not at all with a handed-over frame).
// Torch-free header: at::Tensor is only declared here.
#pragma once

#include "messages/types.hpp"

namespace at {
class Tensor;
}

namespace gwtf::actors {

/// A tensor viewing the payload's bytes; it keeps them alive. A sparse payload (already
/// checked by the codec) becomes a new dense fp32 tensor of its shape.
at::Tensor to_torch(const wire::tensor_payload& payload);

/// A payload viewing the tensor's bytes (contiguous CPU tensors; others are made so once).
wire::tensor_payload to_payload(const at::Tensor& tensor);

} // namespace gwtf::actors
