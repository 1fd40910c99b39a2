// Butterfly averaging of one stage's gradient shares (docs/runtime.md, "Butterfly averaging"),
// a pure core: hivemind's butterfly all-reduce, a reduce-scatter followed by an all-gather.
// The replicas of the stage, sorted by name, cut every share into as many contiguous parts;
// replica i owns part i. Each replica sends part i of its share to its owner (reduce-scatter),
// the owner sums the parts over the contributors in replica-name order and sends the sum to
// every replica (all-gather). Each replica so sends about 2(n-1)/n of a share instead of n-1
// shares, and every replica holds the very same bytes of every part: the replicas' steps stay
// bit-identical, and equal the all-to-all exchange's sum (the same additions in the same order).
//
// This core keeps one iteration's round at one replica: the parts it owns and the sums it got.
// When to fall back to whole shares (a replica of the group gone, groups that differ) is the
// stage actor's decision (actors/compute/compute_aggregation.cpp).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "messages/types.hpp"

namespace gwtf::actors {

/// The fewest replicas that average by butterfly; fewer send their whole share to each other
/// (at 2 replicas both ways send one share each).
inline constexpr std::size_t butterfly_min_group = 3;

/// A range [begin, end) of a share's values.
struct share_span {
  std::uint64_t begin = 0, end = 0;
  std::uint64_t size() const { return end - begin; }
  friend bool operator==(const share_span& a, const share_span& b) { return a.begin == b.begin && a.end == b.end; }
};

/// Part `index` of `n` of a share of `total` values: the parts are contiguous, cover the share
/// in order, differ by at most one block of share_int8_block values, and each begins at a
/// block (int8 shares are cut at their scales). A part may be empty when total < n blocks.
share_span butterfly_part(std::uint64_t total, std::size_t n, std::size_t index);

/// Who a sum counts: replica -> microbatches, replicas with none left out.
using share_tag = std::map<std::string, std::int64_t>;

class butterfly_round {
public:
  /// `group`: the replicas the shares are cut among, sorted, `me` among them; `total`: the
  /// values of a share (the stage's parameters); `type`: what the parts and sums hold, float32
  /// (shares decoded) or int64 (exact sums, training.reproducible_sums: exact).
  butterfly_round(std::vector<std::string> group, const std::string& me, std::uint64_t total,
                  wire::dtype type = wire::dtype::float32);

  const std::vector<std::string>& group() const { return group_; }
  std::size_t index() const { return index_; }
  /// The part this replica owns.
  share_span mine() const { return part(index_); }
  share_span part(std::size_t index) const { return butterfly_part(total_, group_.size(), index); }
  /// The index of `replica` in the group; nullopt when it is not in it.
  std::optional<std::size_t> index_of(const std::string& replica) const;

  /// Owner: `from`'s part of mine(), counting `count` microbatches; `values`: mine().size()
  /// values of the round's type (ignored when count is 0). A later part of `from` replaces it.
  void add_part(const std::string& from, std::int64_t count, wire::tensor_payload values);
  /// Owner: the sum of the parts of `tag`'s replicas in replica-name order, mine().size()
  /// values of the round's type (zeros when `tag` is empty); nullopt while a part is missing,
  /// of another type, or counts otherwise than `tag` says.
  std::optional<wire::tensor_payload> reduce(const share_tag& tag) const;
  /// Owner: what it sent last (the all-gather goes again only when the tag changed).
  const std::optional<share_tag>& sent() const { return sent_; }
  void mark_sent(share_tag tag) { sent_ = std::move(tag); }

  /// Part `index`'s sum over `tag` (part(index).size() values of the round's type); the
  /// latest counts.
  void add_reduced(std::size_t index, share_tag tag, wire::tensor_payload values);
  /// The whole sum over `tag` (total values of the round's type) once every non-empty part's
  /// sum over exactly `tag` is in.
  std::optional<wire::tensor_payload> assemble(const share_tag& tag) const;
  wire::dtype type() const { return type_; }

private:
  std::vector<std::string> group_;
  std::size_t index_ = 0;
  std::uint64_t total_ = 0;
  wire::dtype type_ = wire::dtype::float32;
  std::map<std::string, std::pair<std::int64_t, wire::tensor_payload>> parts_;
  std::map<std::size_t, std::pair<share_tag, wire::tensor_payload>> reduced_;
  std::optional<share_tag> sent_;
};

} // namespace gwtf::actors
