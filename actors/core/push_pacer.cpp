#include "actors/core/push_pacer.hpp"

#include <algorithm>
#include <cmath>

namespace gwtf::actors {

push_pacer::push_pacer(std::size_t chunk, double bytes_per_s)
  : chunk_(std::max<std::size_t>(1, chunk)), bytes_per_s_(bytes_per_s > 0 ? bytes_per_s : 1.0) {}

void push_pacer::add(std::string to, std::uint64_t transfer, std::uint32_t stage, std::uint64_t iteration,
                     std::shared_ptr<const std::vector<std::uint8_t>> blob) {
  pushes_.erase(std::remove_if(pushes_.begin(), pushes_.end(),
                               [&](const push& p) { return p.to == to && p.stage == stage && p.iteration < iteration; }),
                pushes_.end());
  if (!blob || blob->empty())
    return;
  pushes_.push_back(push{std::move(to), transfer, stage, iteration, std::move(blob), 0});
}

std::optional<push_pacer::piece> push_pacer::next() {
  if (pushes_.empty())
    return std::nullopt;
  auto p = std::move(pushes_.front());
  pushes_.pop_front();
  auto& blob = *p.blob;
  auto n = std::min(chunk_, blob.size() - static_cast<std::size_t>(p.offset));
  piece out{p.to, p.transfer, p.stage, p.offset, blob.size(),
            std::vector<std::uint8_t>(blob.begin() + static_cast<std::ptrdiff_t>(p.offset),
                                      blob.begin() + static_cast<std::ptrdiff_t>(p.offset + n))};
  p.offset += n;
  if (p.offset < blob.size())
    pushes_.push_back(std::move(p)); // round robin: the others go first
  return out;
}

std::int64_t push_pacer::gap_us(std::size_t bytes) const {
  // Each push at its own pace: with n under way (round robin), a piece every bytes / pace / n.
  auto under_way = static_cast<double>(std::max<std::size_t>(1, pushes_.size()));
  return static_cast<std::int64_t>(std::ceil(static_cast<double>(bytes) / bytes_per_s_ / under_way * 1e6));
}

} // namespace gwtf::actors
