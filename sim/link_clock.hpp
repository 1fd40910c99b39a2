// Internal to sim/: when each directed link of the simulation is next free.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

namespace gwtf::sim {

// When each directed link is next free, by (from << 32 | to): an open-addressing table
// (linear probing, insert-only, keys < 2^64 - 1). It is looked up for every message the
// simulated hosts send; std::unordered_map's node per entry and modulo cost ~9% of a
// 256-host run.
//
// A stage's all-reduce sends a share over every pair of its replicas (1.5 million pairs per
// stage at 10,000 hosts): it is recorded as a round and applied to a pair's clock when the
// pair is next looked up (or at the next round, for the pairs in the table), in order, as if
// applied at once. Between two rounds no pair still waits for an earlier one (an iteration
// ends after its all-reduce's last share arrived), so a pair not in the table is free when
// a round starts.
class link_clock {
public:
  /// One all-reduce: at `at`, every two hosts with the same stage >= 0 in `stage` send each
  /// other `bytes[stage]` at `bandwidth[region][region]` bytes/s.
  struct round {
    double at = 0;
    std::vector<std::int16_t> stage;               ///< per host; -1: not in this all-reduce
    std::vector<double> bytes;                     ///< per stage
    std::vector<std::vector<double>> bandwidth;    ///< region x region, bytes/s
    std::vector<std::vector<double>> latency;      ///< region x region, s
  };

  explicit link_clock(std::vector<std::size_t> region = {}) : region_(std::move(region)) {}

  /// When a -> b is next free, all-reduces included.
  double& operator[](std::uint64_t key) {
    if (2 * (size_ + 1) > slots_.size())
      grow();
    auto& s = find(key);
    if (s.key == empty) {
      s.key = key;
      s.free = 0;
      s.rounds = 0;
      ++size_;
    }
    catch_up(s);
    return s.free;
  }

  /// Records round `r` and applies it to the pairs in the table; returns when the last of
  /// their shares arrives (-inf if none of them takes part). The pairs not in the table are
  /// the caller's: each starts at `r.at`.
  double add(round r) {
    rounds_.push_back(std::move(r));
    auto& now = rounds_.back();
    double last = -std::numeric_limits<double>::infinity();
    for (auto& s : slots_) {
      if (s.key == empty)
        continue;
      catch_up(s, rounds_.size() - 1);
      auto a = static_cast<std::size_t>(s.key >> 32), b = static_cast<std::size_t>(s.key & 0xffffffffu);
      s.rounds = rounds_.size();
      auto st = now.stage[a];
      if (st < 0 || st != now.stage[b])
        continue;
      auto ra = region_[a], rb = region_[b];
      s.free = std::max(now.at, s.free) + now.bytes[static_cast<std::size_t>(st)] / now.bandwidth[ra][rb];
      last = std::max(last, s.free + now.latency[ra][rb]);
    }
    return last;
  }

private:
  static constexpr std::uint64_t empty = ~std::uint64_t{0};
  struct slot {
    std::uint64_t key = empty;
    double free = 0;
    std::size_t rounds = 0; ///< all-reduce rounds applied
  };
  void catch_up(slot& s, std::size_t upto = std::numeric_limits<std::size_t>::max()) {
    upto = std::min(upto, rounds_.size());
    if (s.rounds >= upto)
      return;
    auto a = static_cast<std::size_t>(s.key >> 32), b = static_cast<std::size_t>(s.key & 0xffffffffu);
    for (; s.rounds < upto; ++s.rounds) {
      auto& r = rounds_[s.rounds];
      auto st = r.stage[a];
      if (st >= 0 && st == r.stage[b])
        s.free = std::max(r.at, s.free) + r.bytes[static_cast<std::size_t>(st)] / r.bandwidth[region_[a]][region_[b]];
    }
  }
  slot& find(std::uint64_t key) {
    auto mask = slots_.size() - 1;
    for (auto i = (key * 0x9E3779B97F4A7C15ull) >> shift_;; i = (i + 1) & mask)
      if (slots_[i].key == key || slots_[i].key == empty)
        return slots_[i];
  }
  void grow() {
    std::vector<slot> old(slots_.empty() ? 1024 : 2 * slots_.size());
    old.swap(slots_);
    shift_ = 64;
    for (auto n = slots_.size(); n > 1; n >>= 1)
      --shift_;
    for (auto& s : old)
      if (s.key != empty)
        find(s.key) = s;
  }
  std::vector<slot> slots_;
  std::size_t size_ = 0;
  int shift_ = 64;
  std::vector<std::size_t> region_; ///< per host
  std::vector<round> rounds_;
};

} // namespace gwtf::sim
