// Process-wide LibTorch setup and diagnostics. The header is torch-free on purpose:
// app/ includes it without paying LibTorch's compile time.
#pragma once

#include <string>

namespace gwtf::model {

/// Sets LibTorch's intra-op threads. Several torch users in one process keep 1 each:
/// two threads oversubscribe with OpenBLAS's own and ran 2.3x slower here.
void configure_torch(int intra_op_threads);

/// LibTorch version, e.g. "1.13.1".
std::string torch_version();

/// The BLAS that serves LibTorch's CPU matmuls in this process, e.g. "OpenBLAS 0.3.21 ...".
/// Detected at run time: Debian picks the library through alternatives, not at link time.
std::string blas_backend();

/// OpenBLAS's own thread count (-1 without OpenBLAS). Several torch users in one process
/// (the embedded cluster's hosts) want 1 each: its default, one per core, oversubscribed
/// the actor threads and cost the cluster 2x here (docs/benchmarks.md).
int blas_threads();
/// Sets it; no effect without OpenBLAS. Returns the previous value.
int set_blas_threads(int threads);

/// True when an optimised BLAS (OpenBLAS) is loaded; false for the slow reference BLAS.
bool blas_is_optimised();

/// Runs a small matmul and returns its max abs error against a hand-computed result:
/// proves that LibTorch and its BLAS actually work in this process.
double torch_self_test();

} // namespace gwtf::model
