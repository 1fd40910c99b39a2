#include "actors/core/atom_rounds.hpp"

#include <algorithm>
#include <iterator>

#include "actors/core/key_digest.hpp"

namespace gwtf::actors {

atom_rounds::atom_rounds(std::vector<std::string> roster, std::string me, int sync_every, std::uint64_t iterations,
                         int microbatches_per_iteration)
  : roster_(std::move(roster)), me_(std::move(me)), sync_every_(std::max(1, sync_every)), iterations_(iterations),
    per_iteration_(microbatches_per_iteration) {
  members_[me_] = 0;
}

std::uint64_t atom_rounds::round_of(std::uint64_t i) const { return i / static_cast<std::uint64_t>(sync_every_); }

std::pair<std::uint64_t, std::uint64_t> atom_rounds::iterations_of(std::uint64_t r) const {
  auto first = r * static_cast<std::uint64_t>(sync_every_);
  return {std::min(first, iterations_), std::min(first + static_cast<std::uint64_t>(sync_every_), iterations_)};
}

bool atom_rounds::ends_round(std::uint64_t i) const {
  return i + 1 == iterations_of(round_of(i)).second;
}

void atom_rounds::member(const std::string& who, std::uint64_t from) {
  if (std::find(roster_.begin(), roster_.end(), who) == roster_.end())
    return;
  members_[who] = from;
  down_.erase(who);
}

void atom_rounds::down(const std::string& who) {
  if (who == me_)
    return;
  members_.erase(who);
  down_.insert(who);
}

std::optional<std::uint64_t> atom_rounds::member_from(const std::string& who) const {
  auto m = members_.find(who);
  return m == members_.end() ? std::nullopt : std::optional<std::uint64_t>{m->second};
}

bool atom_rounds::contributed(const std::string& who, std::uint64_t r, const contribution& c) {
  if (r < open_from_ || down_.count(who) > 0 || std::find(roster_.begin(), roster_.end(), who) == roster_.end())
    return false;
  auto m = members_.find(who);
  if (who != me_) {
    bool earlier = false; // a contribution to an open round before r
    for (auto round = in_.lower_bound(open_from_); round != in_.end() && round->first < r; ++round)
      earlier = earlier || round->second.count(who) > 0;
    if (m == members_.end() || (!earlier && m->second < r))
      members_[who] = r;
    else if (m->second > r)
      return false;
  }
  in_[r][who] = c;
  return true;
}

std::vector<std::string> atom_rounds::waiting(std::uint64_t r) const {
  std::vector<std::string> out;
  auto round = in_.find(r);
  for (auto& [who, from] : members_)
    if (from <= r && (round == in_.end() || round->second.count(who) == 0))
      out.push_back(who);
  return out;
}

std::optional<std::vector<std::string>> atom_rounds::complete(std::uint64_t r) const {
  if (r < open_from_ || !waiting(r).empty())
    return std::nullopt;
  std::vector<std::string> out;
  for (auto& [who, c] : in_.at(r)) // map: name order
    out.push_back(who);
  return out;
}

const atom_rounds::contribution* atom_rounds::of(std::uint64_t r, const std::string& who) const {
  auto round = in_.find(r);
  if (round == in_.end())
    return nullptr;
  auto c = round->second.find(who);
  return c == round->second.end() ? nullptr : &c->second;
}

std::string atom_rounds::check(std::uint64_t r, const std::vector<std::string>& contributors) const {
  auto [first, end] = iterations_of(r);
  for (auto& who : contributors) {
    auto* c = of(r, who);
    if (!c)
      return who + " has no contribution to round " + std::to_string(r);
    if (c->first_iteration < first || c->end_iteration > end || c->first_iteration > c->end_iteration)
      return who + "'s iterations [" + std::to_string(c->first_iteration) + ", " + std::to_string(c->end_iteration)
             + ") are not inside round " + std::to_string(r) + "'s [" + std::to_string(first) + ", "
             + std::to_string(end) + ")";
    auto index = static_cast<std::uint32_t>(std::find(roster_.begin(), roster_.end(), who) - roster_.begin());
    std::uint64_t expected = 0;
    for (auto i = c->first_iteration; i < c->end_iteration; ++i)
      expected += expected_digest(i, {{index, per_iteration_}});
    auto n = static_cast<std::int64_t>(c->end_iteration - c->first_iteration) * per_iteration_;
    if (c->microbatches != n || c->keys_digest != expected)
      return who + "'s " + std::to_string(c->microbatches) + " microbatches of iterations ["
             + std::to_string(c->first_iteration) + ", " + std::to_string(c->end_iteration) + ") are not each of its "
             + std::to_string(n) + " once (a microbatch added twice, missing or of another iteration)";
  }
  return {};
}

void atom_rounds::holds(const std::string& who, std::uint64_t r, std::vector<std::string> contributors) {
  if (r < open_from_ || r > open_from_ + 2 || std::find(roster_.begin(), roster_.end(), who) == roster_.end())
    return;
  std::sort(contributors.begin(), contributors.end());
  contributors.erase(std::unique(contributors.begin(), contributors.end()), contributors.end());
  holds_[r][who] = std::move(contributors);
}

std::optional<std::vector<std::string>> atom_rounds::agreed(std::uint64_t r, const std::vector<std::string>& mine) const {
  if (r < open_from_)
    return std::nullopt;
  auto out = mine;
  std::sort(out.begin(), out.end());
  auto round = holds_.find(r);
  for (auto& who : mine) {
    if (who == me_ || members_.count(who) == 0)
      continue; // down since it contributed: not waited for, its announcement not needed
    if (round == holds_.end() || round->second.count(who) == 0)
      return std::nullopt;
    auto& theirs = round->second.at(who);
    std::vector<std::string> both;
    std::set_intersection(out.begin(), out.end(), theirs.begin(), theirs.end(), std::back_inserter(both));
    out = std::move(both);
  }
  return out;
}

void atom_rounds::close(std::uint64_t r) {
  open_from_ = std::max(open_from_, r + 1);
  in_.erase(in_.begin(), in_.upper_bound(r));
  holds_.erase(holds_.begin(), holds_.upper_bound(r));
}

} // namespace gwtf::actors
