// Training data: corpus files and deterministic microbatch sampling. No LibTorch: any host
// can reproduce any microbatch from (seed, data holder, iteration, index) alone.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "model/model_config.hpp"

namespace gwtf::model {

/// A corpus file mapped read-only: raw text (bytes are tokens) or nanoGPT uint16 tokens.
class corpus {
public:
  /// Opens and checks `cfg.path`: readable, long enough for one sequence, and (tokens
  /// format) an even size with every id below `vocab`. Returns the reason on failure.
  static std::variant<corpus, std::string> open(const data_config& cfg, int vocab, int seq_len);

  /// Number of tokens.
  std::size_t size() const { return size_; }

  /// Token at position i (< size()).
  std::int32_t at(std::size_t i) const;

private:
  struct mapping;
  std::shared_ptr<const mapping> map_;
  data_format format_ = data_format::text;
  std::size_t size_ = 0;
};

/// Identifies one microbatch of the whole run: every host derives the same tokens from it.
struct microbatch_id {
  std::uint64_t iteration = 0; ///< training iteration
  std::uint32_t holder = 0;    ///< index of the data holder (order of `hosts` in the config)
  std::uint32_t index = 0;     ///< 0 .. microbatches_per_holder-1

  /// A single 64-bit key, unique for iteration < 2^40, holder < 2^12, index < 2^12: the
  /// configs are validated to those (max_data_holders, max_microbatches_per_holder).
  std::uint64_t key() const { return iteration << 24 | std::uint64_t{holder} << 12 | index; }
};

/// Tokens of one microbatch: `rows` sequences of `cols` = seq_len + 1 tokens each; the model
/// reads columns 0..seq_len-1 and predicts columns 1..seq_len.
struct microbatch_tokens {
  int rows = 0;
  int cols = 0;
  std::vector<std::int32_t> tokens; ///< row-major, rows * cols
};

/// Samples the sequences of microbatch `id`: each row starts at a position drawn from a
/// hash of (seed, id, row), so the result is independent of order, host and thread.
microbatch_tokens sample(const corpus& data, std::uint64_t seed, const microbatch_id& id,
                         int microbatch_size, int seq_len);

/// splitmix64: the mixing function behind every derived seed of the project.
std::uint64_t mix64(std::uint64_t x);

} // namespace gwtf::model
