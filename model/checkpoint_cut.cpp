#include "model/checkpoint_cut.hpp"

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>

#include "model/checkpoint.hpp"

namespace gwtf::model {

std::variant<checkpoint_cut, std::string> find_cut(const std::vector<std::vector<std::string>>& roots,
                                                   std::uint64_t config_hash, std::optional<std::uint64_t> at,
                                                   std::vector<std::string>& notes) {
  auto stages = static_cast<std::uint32_t>(roots.size());
  // Per stage: iteration -> the first valid file of it.
  std::vector<std::map<std::uint64_t, std::string>> valid(stages);
  for (std::uint32_t s = 0; s < stages; ++s) {
    for (auto& root : roots[s])
      for (auto i : model::checkpoint_iterations(root, s)) {
        if ((at && i != *at) || valid[s].count(i))
          continue;
        auto path = model::checkpoint_path(root, s, i);
        auto c = model::read_checkpoint(path, s, config_hash);
        if (auto* e = std::get_if<std::string>(&c))
          notes.push_back(*e);
        else
          valid[s][i] = path;
      }
    if (valid[s].empty())
      return "stage " + std::to_string(s) + " has no valid checkpoint"
             + (at ? " of iteration " + std::to_string(*at) : std::string{});
  }
  std::vector<std::vector<std::uint64_t>> per_stage(stages);
  for (std::uint32_t s = 0; s < stages; ++s)
    for (auto& [i, path] : valid[s])
      per_stage[s].push_back(i);
  auto cut = model::consistent_cut(per_stage);
  if (!cut) {
    std::string text = "no iteration has a checkpoint of every stage:";
    for (std::uint32_t s = 0; s < stages; ++s) {
      text += " stage " + std::to_string(s) + " has";
      for (auto i : per_stage[s])
        text += " " + std::to_string(i);
      text += s + 1 < stages ? ";" : "";
    }
    return text;
  }
  checkpoint_cut out;
  out.iteration = *cut;
  for (std::uint32_t s = 0; s < stages; ++s)
    out.files.push_back(valid[s].at(*cut));
  return out;
}

std::vector<std::vector<std::string>> roots_under(const std::string& dir, int stages) {
  std::vector<std::string> roots;
  std::error_code ec;
  for (auto& e : std::filesystem::directory_iterator(dir, ec))
    if (e.is_directory(ec)) {
      roots.push_back(e.path().string());
      for (auto& r : std::filesystem::directory_iterator(e.path() / "replicas", ec))
        if (r.is_directory(ec))
          roots.push_back(r.path().string());
    }
  std::sort(roots.begin(), roots.end());
  return std::vector<std::vector<std::string>>(static_cast<std::size_t>(std::max(stages, 0)), roots);
}

} // namespace gwtf::model
