#include "actors/core/key_digest.hpp"

#include "model/data.hpp"

namespace gwtf::actors {

std::uint64_t key_digest(const std::vector<std::uint64_t>& keys) {
  std::uint64_t sum = 0;
  for (auto k : keys)
    sum += model::mix64(k);
  return sum;
}

std::uint64_t expected_digest(std::uint64_t iteration, const std::map<std::uint32_t, std::int64_t>& per_holder) {
  std::vector<std::uint64_t> keys;
  for (auto& [holder, n] : per_holder)
    for (std::int64_t j = 0; j < n; ++j)
      keys.push_back(model::microbatch_id{iteration, holder, static_cast<std::uint32_t>(j)}.key());
  return key_digest(keys);
}

} // namespace gwtf::actors
