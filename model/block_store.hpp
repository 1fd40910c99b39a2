// A file-backed home for a stage's tensors (layer swapping, docs/model.md "Layer swapping"):
// each tensor is a page-aligned region of one unlinked file, mapped shared, so the kernel
// holds it in the page cache or on disk and the process keeps resident only the pages it
// touched since their last release. Freed regions are unmapped, their pages punched out of
// the file, and reused. No CAF; LibTorch header (include from model/ sources only).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include <torch/types.h>

namespace gwtf::model {

class block_store {
public:
  /// Creates the store's file in `dir` (unlinked at once: nothing is left behind when the
  /// process dies). Throws std::runtime_error naming the directory when it cannot.
  explicit block_store(const std::string& dir);
  ~block_store();
  block_store(const block_store&) = delete;
  block_store& operator=(const block_store&) = delete;

  /// A zero tensor of `sizes` and `type` in the file. It stays valid after the store is gone
  /// (the file closes with its last tensor); freeing it returns its region.
  torch::Tensor allocate(at::IntArrayRef sizes, torch::ScalarType type);
  /// A copy of `t` (contiguous, same sizes and type) in the file.
  torch::Tensor adopt(const torch::Tensor& t);

  // The advice below goes to a region of a store only (a registry of live regions); any other
  // tensor is left alone.

  /// Asks the kernel to read a stored tensor's pages ahead (asynchronously).
  static void prefetch(const torch::Tensor& t);
  /// Maps a stored tensor's pages into the process in one call (readable, or writable when
  /// `write`) rather than one page fault at a time; waits for pages still on disk. Without
  /// MADV_POPULATE_* (Linux before 5.14) the pages fault in as they are used.
  static void populate(const torch::Tensor& t, bool write);
  /// Drops a stored tensor's pages from the process (its values stay in the file).
  static void release(const torch::Tensor& t);

  /// Bytes of the file in use (regions allocated and not freed).
  std::int64_t bytes_in_use() const;

private:
  struct file;
  std::shared_ptr<file> file_;
};

} // namespace gwtf::model
