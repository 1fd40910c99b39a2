#include "actors/compute/tensor_bridge.hpp"

#include "model/sparse.hpp"
#include "model/tensor_bytes.hpp"

namespace gwtf::actors {

at::Tensor to_torch(const wire::tensor_payload& payload) {
  model::tensor_bytes b;
  b.type = static_cast<model::element_type>(payload.type); // same order as wire::dtype
  if (payload.sparse) {
    b.shape = {static_cast<std::int64_t>(payload.indices.size())};
    b.owner = payload.bytes;
    b.data = payload.bytes.get();
    b.size = payload.size;
    return model::densify(model::as_tensor(b), payload.indices, payload.shape);
  }
  b.shape = payload.shape;
  b.owner = payload.bytes;
  b.data = payload.bytes.get();
  b.size = payload.size;
  return model::as_tensor(b);
}

wire::tensor_payload to_payload(const at::Tensor& tensor) {
  auto b = model::bytes_of(tensor);
  wire::tensor_payload p;
  p.type = static_cast<wire::dtype>(b.type);
  p.shape = std::move(b.shape);
  p.bytes = std::shared_ptr<const std::uint8_t>(b.owner, static_cast<const std::uint8_t*>(b.data));
  p.size = b.size;
  return p;
}

} // namespace gwtf::actors
