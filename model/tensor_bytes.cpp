#include "model/tensor_bytes.hpp"

#include <stdexcept>

namespace gwtf::model {

namespace {

torch::ScalarType scalar_type(element_type t) {
  switch (t) {
    case element_type::float32: return torch::kFloat32;
    case element_type::float16: return torch::kFloat16;
    case element_type::bfloat16: return torch::kBFloat16;
    case element_type::int64: return torch::kInt64;
    case element_type::int32: return torch::kInt32;
    case element_type::int8: return torch::kInt8;
  }
  throw std::invalid_argument("unknown element type");
}

element_type element_of(torch::ScalarType t) {
  switch (t) {
    case torch::kFloat32: return element_type::float32;
    case torch::kFloat16: return element_type::float16;
    case torch::kBFloat16: return element_type::bfloat16;
    case torch::kInt64: return element_type::int64;
    case torch::kInt32: return element_type::int32;
    case torch::kInt8: return element_type::int8;
    default: throw std::invalid_argument("tensor element type cannot cross hosts");
  }
}

} // namespace

torch::Tensor as_tensor(const tensor_bytes& bytes) {
  auto owner = bytes.owner; // captured by the deleter: the bytes live as long as the tensor
  return torch::from_blob(const_cast<void*>(bytes.data), bytes.shape,
                          [owner](void*) mutable { owner.reset(); },
                          torch::TensorOptions().dtype(scalar_type(bytes.type)));
}

tensor_bytes bytes_of(const torch::Tensor& t) {
  auto c = t.detach().contiguous().cpu(); // no copy when already contiguous on the CPU
  auto holder = std::make_shared<torch::Tensor>(c);
  tensor_bytes out;
  out.type = element_of(c.scalar_type());
  out.shape.assign(c.sizes().begin(), c.sizes().end());
  out.data = holder->data_ptr();
  out.size = static_cast<std::size_t>(c.numel()) * c.element_size();
  out.owner = std::shared_ptr<const void>(holder, holder->data_ptr());
  return out;
}

} // namespace gwtf::model
