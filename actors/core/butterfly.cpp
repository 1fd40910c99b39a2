#include "actors/core/butterfly.hpp"

#include <algorithm>
#include <cstring>

#include "common/share_format.hpp"

namespace gwtf::actors {

namespace {

const float* floats(const wire::tensor_payload& p) {
  return reinterpret_cast<const float*>(p.bytes.get());
}

// A float32 payload of exactly n values.
bool holds(const wire::tensor_payload& p, std::uint64_t n) {
  return p.type == wire::dtype::float32 && p.size == n * sizeof(float) && (n == 0 || p.bytes);
}

} // namespace

share_span butterfly_part(std::uint64_t total, std::size_t n, std::size_t index) {
  if (n == 0 || index >= n)
    return {total, total};
  auto blocks = (total + share_int8_block - 1) / share_int8_block;
  auto at = [&](std::size_t k) {
    return std::min<std::uint64_t>(total, blocks * k / n * share_int8_block);
  };
  return {at(index), at(index + 1)};
}

butterfly_round::butterfly_round(std::vector<std::string> group, const std::string& me, std::uint64_t total)
  : group_(std::move(group)), total_(total) {
  index_ = index_of(me).value_or(group_.size());
}

std::optional<std::size_t> butterfly_round::index_of(const std::string& replica) const {
  auto it = std::lower_bound(group_.begin(), group_.end(), replica);
  if (it == group_.end() || *it != replica)
    return std::nullopt;
  return static_cast<std::size_t>(it - group_.begin());
}

void butterfly_round::add_part(const std::string& from, std::int64_t count, wire::tensor_payload values) {
  parts_[from] = {count, std::move(values)};
}

std::optional<std::vector<float>> butterfly_round::reduce(const share_tag& tag) const {
  auto span = mine();
  std::vector<float> sum;
  bool first = true;
  for (auto& [replica, count] : tag) { // name order: the same additions at every owner
    auto it = parts_.find(replica);
    if (it == parts_.end() || it->second.first != count || !holds(it->second.second, span.size()))
      return std::nullopt;
    auto* v = floats(it->second.second);
    if (first) {
      sum.assign(v, v + span.size());
      first = false;
    } else {
      for (std::size_t k = 0; k < sum.size(); ++k)
        sum[k] += v[k];
    }
  }
  if (first)
    sum.assign(span.size(), 0.0f);
  return sum;
}

void butterfly_round::add_reduced(std::size_t index, share_tag tag, wire::tensor_payload values) {
  if (index < group_.size())
    reduced_[index] = {std::move(tag), std::move(values)};
}

std::optional<std::vector<float>> butterfly_round::assemble(const share_tag& tag) const {
  std::vector<float> whole(static_cast<std::size_t>(total_), 0.0f);
  for (std::size_t i = 0; i < group_.size(); ++i) {
    auto span = part(i);
    if (span.size() == 0)
      continue;
    auto it = reduced_.find(i);
    if (it == reduced_.end() || it->second.first != tag || !holds(it->second.second, span.size()))
      return std::nullopt;
    std::memcpy(whole.data() + span.begin, floats(it->second.second), span.size() * sizeof(float));
  }
  return whole;
}

} // namespace gwtf::actors
