// Checkpoint files of stage states (docs/checkpoints.md), without LibTorch: the payload is a
// stage's export_state() blob, opaque here. One file per stage and iteration under a host's
// checkpoint root:
//
//   ROOT/stage-S/iteration-NNNNNNNNNN.ckpt
//
// Format (little-endian): "GWTFCKPT", u32 version, u32 stage, u32 stages, u64 iteration
// (optimizer steps applied: the next iteration to run), u64 config hash, u16 + host name,
// u64 payload size, payload, u64 fast_hash of everything before it. Written atomically
// (temporary file, fsync, rename, fsync of the directory): a kill during a write leaves the
// previous files as they were and at most a temporary file that the next write removes.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace gwtf::model {

inline constexpr std::uint32_t checkpoint_version = 1;

/// What a checkpoint says about itself.
struct checkpoint_meta {
  std::uint32_t stage = 0;
  std::uint32_t stages = 0;
  std::uint64_t iteration = 0;   ///< iterations applied (the next one to run)
  std::uint64_t config_hash = 0; ///< deploy's checkpoint_hash: what must match to resume
  std::string host;              ///< who wrote it
};

struct checkpoint {
  checkpoint_meta meta;
  std::vector<std::uint8_t> state; ///< model::stage::export_state() bytes
};

/// A checkpoint, or why not.
template <class T>
using checked = std::variant<T, std::string>;

std::vector<std::uint8_t> encode_checkpoint(const checkpoint_meta& meta, const std::vector<std::uint8_t>& state);
/// Refuses anything but a whole, intact file of this version (names what is wrong).
checked<checkpoint> decode_checkpoint(const std::uint8_t* data, std::size_t size);

/// What a stage state blob (model::stage::export_state, docs/model.md) says about itself,
/// checked without LibTorch: magic, content hash, stage and the iteration it resumes at (its
/// optimizer steps, + 1 when it carries a pending step: training.averaging overlap). For
/// blobs that arrive from peers (checkpoint replicas).
struct state_blob_info {
  std::uint32_t stage = 0;
  std::uint64_t steps = 0; ///< the iteration it resumes at (a checkpoint's iteration)
};
checked<state_blob_info> describe_state_blob(const std::vector<std::uint8_t>& blob);

/// ROOT/stage-S/iteration-N.ckpt
std::string checkpoint_path(const std::string& root, std::uint32_t stage, std::uint64_t iteration);

/// Writes atomically, then keeps the newest `keep` checkpoints of the stage (and removes
/// temporary files that a killed writer left). Empty on success, else what failed.
std::string write_checkpoint(const std::string& root, const checkpoint_meta& meta,
                             const std::vector<std::uint8_t>& state, int keep);

/// Iterations of the stage's checkpoint files under `root`, by file name, ascending
/// (unverified; an unreadable root has none).
std::vector<std::uint64_t> checkpoint_iterations(const std::string& root, std::uint32_t stage);

/// Reads and verifies one file: intact, this stage, this config hash.
checked<checkpoint> read_checkpoint(const std::string& path, std::uint32_t stage, std::uint64_t config_hash);

/// The newest valid checkpoint of `stage` under `root`: exactly at `at` when given, else the
/// newest. Every file passed over (corrupted, truncated, another config) adds a line to
/// `skipped`. An error names the root and why nothing was usable.
checked<checkpoint> load_checkpoint(const std::string& root, std::uint32_t stage, std::uint64_t config_hash,
                                    std::optional<std::uint64_t> at, std::vector<std::string>& skipped);

/// The consistent cut: the newest iteration at which every stage 0..stages-1 has a
/// checkpoint, given each stage's available iterations (from any of its hosts). Nothing
/// when some stage has none in common with the others.
std::optional<std::uint64_t> consistent_cut(const std::vector<std::vector<std::uint64_t>>& per_stage);

} // namespace gwtf::model
