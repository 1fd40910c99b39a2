// The consistent cut over the checkpoint roots of many hosts (docs/checkpoints.md): used to
// resume the embedded cluster and launch, and by export and eval. No LibTorch, no CAF.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace gwtf::model {

struct checkpoint_cut {
  std::uint64_t iteration = 0;
  std::vector<std::string> files; ///< per stage: one verified checkpoint file of `iteration`
};

/// `roots[s]`: the checkpoint roots that may hold stage s. With `at`, that iteration if every
/// stage has a valid file of it; else the newest iteration every stage has. Every file is
/// verified (hash, stage, `config_hash`) before it counts; `notes` gets a line per file
/// rejected. An error names the stage that lacks one.
std::variant<checkpoint_cut, std::string> find_cut(const std::vector<std::vector<std::string>>& roots,
                                                   std::uint64_t config_hash, std::optional<std::uint64_t> at,
                                                   std::vector<std::string>& notes);

/// Every directory directly under `dir` and every DIR/HOST/replicas/OWNER, as roots of every
/// one of `stages` stages (hosts' data_dirs side by side: DIR/HOST/stage-S/...).
std::vector<std::vector<std::string>> roots_under(const std::string& dir, int stages);

} // namespace gwtf::model
