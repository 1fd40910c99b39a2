#include "actors/core/link_estimator.hpp"

#include <algorithm>
#include <cmath>

namespace gwtf::actors {

void link_estimator::push(std::deque<double>& q, double v, std::size_t window) {
  q.push_back(v);
  while (q.size() > window)
    q.pop_front();
}

double link_estimator::least(const std::deque<double>& q) {
  return *std::min_element(q.begin(), q.end());
}

void link_estimator::small(double rtt_s) {
  if (std::isfinite(rtt_s) && rtt_s >= 0)
    push(small_, rtt_s, window_);
}

std::optional<routing::link_estimate> link_estimator::bulk(double rtt_s, std::size_t bytes) {
  if (!std::isfinite(rtt_s) || !(rtt_s > 0) || bytes == 0)
    return std::nullopt;
  push(bulk_, rtt_s, window_);
  if (small_.empty())
    return std::nullopt;
  double s = least(small_);
  double extra = std::max(least(bulk_) - s, 1e-6);
  return routing::link_estimate{s / 2, static_cast<double>(bytes) / extra};
}

std::optional<double> link_estimator::least_small() const {
  if (small_.empty())
    return std::nullopt;
  return least(small_);
}

} // namespace gwtf::actors
