// caf-gwtf export and eval (docs/checkpoints.md): the whole model at a checkpoint cut.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>

#include "app/config/cluster_config.hpp"

namespace gwtf::app {

struct checkpoint_tool_options {
  std::string checkpoint;                 ///< hosts' node.data_dir side by side: DIR/HOST/stage-S/
  std::optional<std::uint64_t> iteration; ///< empty: the newest consistent cut
  std::string out;                        ///< export: the Hugging Face directory to write
  std::string batch_out;                  ///< eval: the batch and its loss as JSON (optional)
  std::string from;                       ///< import: the Hugging Face directory to read
};

/// Writes OUT/model.safetensors and OUT/config.json. Returns the process exit code; every
/// error is one line on `err`.
int run_export(const cluster_config& cfg, const checkpoint_tool_options& opts, std::ostream& out, std::ostream& err);

/// Prints the loss of the model at the cut on the held-out batch: 4 microbatches of
/// training.microbatch_size sequences drawn for holder index 4095 (no data holder has it;
/// the positions are random windows of the same corpus, not a separate split).
int run_eval(const cluster_config& cfg, const checkpoint_tool_options& opts, std::ostream& out, std::ostream& err);

/// Reads FROM/config.json and FROM/model.safetensors (GPT-2 or LLaMA layout, F32/F16/BF16),
/// checks them against the config's model, and writes for every declared host its stage's
/// checkpoint of iteration 0 (those weights, fresh Adam moments) under CHECKPOINT/HOST/, so
/// that `--resume` (node.data_dir = CHECKPOINT) trains from them.
int run_import(const cluster_config& cfg, const checkpoint_tool_options& opts, std::ostream& out, std::ostream& err);

} // namespace gwtf::app
