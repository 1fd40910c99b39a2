#include "actors/core/replica_vote.hpp"

namespace gwtf::actors {

void replica_vote::mine(std::uint64_t iteration, std::uint64_t hash) {
  mine_[iteration] = hash;
  auto oldest = iteration > 8 ? iteration - 8 : 0;
  theirs_.erase(theirs_.begin(), theirs_.lower_bound(oldest));
  mine_.erase(mine_.begin(), mine_.lower_bound(oldest));
}

void replica_vote::theirs(std::uint64_t iteration, const std::string& who, std::uint64_t hash) {
  theirs_[iteration][who] = hash;
}

std::optional<replica_vote::verdict> replica_vote::decide(std::uint64_t iteration, const std::string& me,
                                                          std::size_t others) {
  auto m = mine_.find(iteration);
  if (m == mine_.end())
    return std::nullopt;
  auto t = theirs_.find(iteration);
  std::size_t in = t == theirs_.end() ? 0 : t->second.size();
  if (in < others || in == 0)
    return std::nullopt;
  std::map<std::uint64_t, std::pair<int, std::string>> votes; // hash -> (count, lowest name)
  auto vote = [&](const std::string& who, std::uint64_t v) {
    auto& e = votes[v];
    ++e.first;
    if (e.second.empty() || who < e.second)
      e.second = who;
  };
  vote(me, m->second);
  for (auto& [who, v] : t->second)
    vote(who, v);
  auto best = votes.begin();
  for (auto it = votes.begin(); it != votes.end(); ++it)
    if (it->second.first > best->second.first
        || (it->second.first == best->second.first && it->second.second < best->second.second))
      best = it;
  verdict out{best->first != m->second, best->second.second};
  theirs_.erase(t);
  mine_.erase(mine_.begin(), mine_.upper_bound(iteration));
  return out;
}

} // namespace gwtf::actors
