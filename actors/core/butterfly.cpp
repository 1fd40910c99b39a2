#include "actors/core/butterfly.hpp"

#include <algorithm>
#include <cstring>

#include "common/share_format.hpp"

namespace gwtf::actors {

namespace {

// A payload of exactly n values of `type`.
bool holds(const wire::tensor_payload& p, wire::dtype type, std::uint64_t n) {
  return p.type == type && !p.sparse && p.size == n * wire::dtype_size(type) && (n == 0 || p.bytes);
}

// An owning dense payload of n values of `type`, zeroed.
wire::tensor_payload zeros(wire::dtype type, std::uint64_t n) {
  auto bytes = static_cast<std::size_t>(n) * wire::dtype_size(type);
  std::shared_ptr<std::uint8_t> buffer(new std::uint8_t[std::max<std::size_t>(1, bytes)](), std::default_delete<std::uint8_t[]>());
  return {type, {static_cast<std::int64_t>(n)}, std::move(buffer), bytes, false, {}};
}

template <class T>
T* values_of(wire::tensor_payload& p) {
  return reinterpret_cast<T*>(const_cast<std::uint8_t*>(p.bytes.get()));
}
template <class T>
const T* values_of(const wire::tensor_payload& p) {
  return reinterpret_cast<const T*>(p.bytes.get());
}

// sum += part, value by value (float32: the all-to-all step's additions; int64: exact).
template <class T>
void add_values(wire::tensor_payload& sum, const wire::tensor_payload& part, std::uint64_t n) {
  auto* s = values_of<T>(sum);
  auto* v = values_of<T>(part);
  for (std::uint64_t k = 0; k < n; ++k)
    s[k] += v[k];
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

butterfly_round::butterfly_round(std::vector<std::string> group, const std::string& me, std::uint64_t total,
                                 wire::dtype type)
  : group_(std::move(group)), total_(total), type_(type) {
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

std::optional<wire::tensor_payload> butterfly_round::reduce(const share_tag& tag) const {
  auto span = mine();
  auto n = span.size();
  auto sum = zeros(type_, n);
  bool first = true;
  for (auto& [replica, count] : tag) { // name order: the same additions at every owner
    auto it = parts_.find(replica);
    if (it == parts_.end() || it->second.first != count || !holds(it->second.second, type_, n))
      return std::nullopt;
    auto& part = it->second.second;
    if (first) { // the first copied, as model::average does (0 + x is not always x's bits: -0)
      if (n > 0)
        std::memcpy(values_of<std::uint8_t>(sum), part.bytes.get(), sum.size);
      first = false;
    } else if (type_ == wire::dtype::int64) {
      add_values<std::int64_t>(sum, part, n);
    } else {
      add_values<float>(sum, part, n);
    }
  }
  return sum;
}

void butterfly_round::add_reduced(std::size_t index, share_tag tag, wire::tensor_payload values) {
  if (index < group_.size())
    reduced_[index] = {std::move(tag), std::move(values)};
}

std::optional<wire::tensor_payload> butterfly_round::assemble(const share_tag& tag) const {
  auto whole = zeros(type_, total_);
  auto width = wire::dtype_size(type_);
  for (std::size_t i = 0; i < group_.size(); ++i) {
    auto span = part(i);
    if (span.size() == 0)
      continue;
    auto it = reduced_.find(i);
    if (it == reduced_.end() || it->second.first != tag || !holds(it->second.second, type_, span.size()))
      return std::nullopt;
    std::memcpy(values_of<std::uint8_t>(whole) + span.begin * width, it->second.second.bytes.get(), span.size() * width);
  }
  return whole;
}

} // namespace gwtf::actors
