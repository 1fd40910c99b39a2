#include "model/torch_runtime.hpp"

#include <dlfcn.h>

#include <torch/types.h>
#include <torch/version.h>
#include <ATen/Parallel.h>

namespace gwtf::model {

void configure_torch(int intra_op_threads) {
  at::set_num_threads(intra_op_threads);
}

std::string torch_version() {
  return TORCH_VERSION;
}

namespace {

using openblas_config_fn = char* (*)();

openblas_config_fn find_openblas() {
  // Make sure libblas is loaded: LibTorch resolves it lazily on first use otherwise.
  static bool warmed = [] {
    auto a = torch::ones({2, 2});
    (void)torch::mm(a, a);
    return true;
  }();
  (void)warmed;
  return reinterpret_cast<openblas_config_fn>(dlsym(RTLD_DEFAULT, "openblas_get_config"));
}

} // namespace

int blas_threads() {
  find_openblas(); // loads it
  using get_fn = int (*)();
  if (auto fn = reinterpret_cast<get_fn>(dlsym(RTLD_DEFAULT, "openblas_get_num_threads")))
    return fn();
  return -1;
}

int set_blas_threads(int threads) {
  int before = blas_threads();
  using set_fn = void (*)(int);
  if (auto fn = reinterpret_cast<set_fn>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads")))
    fn(threads);
  return before;
}

std::string blas_backend() {
  if (auto fn = find_openblas())
    return fn(); // "OpenBLAS 0.3.21 DYNAMIC_ARCH ..."
  return "reference BLAS (slow: install libopenblas0-pthread)";
}

bool blas_is_optimised() {
  return find_openblas() != nullptr;
}

double torch_self_test() {
  // [[1,2],[3,4]] x [[5,6],[7,8]] = [[19,22],[43,50]]
  auto a = torch::tensor({1.0f, 2.0f, 3.0f, 4.0f}).reshape({2, 2});
  auto b = torch::tensor({5.0f, 6.0f, 7.0f, 8.0f}).reshape({2, 2});
  auto expected = torch::tensor({19.0f, 22.0f, 43.0f, 50.0f}).reshape({2, 2});
  return (torch::mm(a, b) - expected).abs().max().item<double>();
}

} // namespace gwtf::model
