// LibTorch is linked, computes correctly, and uses an optimised BLAS (about 15x faster than
// the reference BLAS it silently falls back to when libopenblas0-pthread is missing).
#include "model/torch_runtime.hpp"

#include <doctest/doctest.h> // after torch headers: glog redefines CHECK (toolchain.md)

TEST_CASE("torch runtime: version, BLAS and a real matmul") {
  gwtf::model::configure_torch(1);
  CHECK(gwtf::model::torch_version().rfind("1.13", 0) == 0);
  CHECK(gwtf::model::torch_self_test() == 0.0);
  INFO("BLAS: " << gwtf::model::blas_backend());
  CHECK(gwtf::model::blas_is_optimised());
  CHECK(gwtf::model::blas_backend().find("OpenBLAS") == 0);
}

TEST_CASE("torch runtime: OpenBLAS threads can be set and restored") {
  int before = gwtf::model::blas_threads();
  REQUIRE(before >= 1);
  CHECK(gwtf::model::set_blas_threads(1) == before);
  CHECK(gwtf::model::blas_threads() == 1);
  CHECK(gwtf::model::set_blas_threads(before) == 1);
  CHECK(gwtf::model::blas_threads() == before);
}
