#include "actors/core/state_download.hpp"

#include <algorithm>

namespace gwtf::actors {

std::optional<next_source> choose_state_source(const std::vector<std::string>& replicas,
                                               const std::vector<std::string>& others, bool copies,
                                               const state_source& last) {
  std::vector<state_source> all;
  for (auto& r : replicas)
    all.push_back({r, false});
  if (copies)
    for (auto& o : others)
      all.push_back({o, true});
  if (all.empty())
    return std::nullopt;
  if (last.host.empty())
    return next_source{all.front(), false};
  // After `last` in the order above; a source that is gone meanwhile is passed by its place.
  auto after = [&](const state_source& s) {
    if (s.checkpoint != last.checkpoint)
      return s.checkpoint; // copies come after the replicas
    return s.host > last.host;
  };
  auto it = std::find_if(all.begin(), all.end(), after);
  if (it == all.end())
    return next_source{all.front(), true};
  return next_source{*it, false};
}

void state_download::start(std::string source, std::uint64_t transfer, bool checkpoint) {
  source_ = std::move(source);
  transfer_ = transfer;
  checkpoint_ = checkpoint;
  blob_.clear();
  received_.clear();
}

void state_download::cancel() {
  transfer_ = 0;
  blob_ = {}; // a partial state can be large: not kept for a transfer nobody finishes
  received_.clear();
}

std::uint64_t state_download::received() const {
  std::uint64_t have = 0;
  for (auto& [offset, n] : received_)
    have += n;
  return have;
}

std::vector<std::uint8_t> state_download::take() {
  received_.clear();
  return std::move(blob_);
}

state_download::outcome state_download::chunk(const std::string& from, const wire::state_chunk& c,
                                              std::uint32_t stage, std::uint64_t limit) {
  if (transfer_ == 0 || c.transfer_id != transfer_ || from != source_ || c.stage != stage)
    return outcome::ignored;
  if (c.total_bytes > limit || c.offset > c.total_bytes || c.data.size() > c.total_bytes - c.offset)
    return outcome::refused;
  if (c.total_bytes == 0) { // "none here": no state is empty
    cancel();
    return outcome::declined;
  }
  if (blob_.size() != c.total_bytes) { // the first chunk, or the source's state changed size
    blob_.assign(c.total_bytes, 0);
    received_.clear();
  }
  std::copy(c.data.begin(), c.data.end(), blob_.begin() + static_cast<std::ptrdiff_t>(c.offset));
  received_[c.offset] = c.data.size();
  if (received() < c.total_bytes)
    return outcome::partial;
  transfer_ = 0;
  return outcome::complete;
}

} // namespace gwtf::actors
