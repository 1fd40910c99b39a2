#include "actors/core/iteration_barrier.hpp"

#include <cmath>

namespace gwtf::actors {

iteration_barrier::iteration_barrier(int stages) : stages_(stages) {}

void iteration_barrier::holder_done(const wire::iteration_done& d) {
  done_[d.iteration].emplace(d.holder, d);
}

std::vector<std::string> iteration_barrier::awaited_holders(std::uint64_t iteration,
                                                           const std::vector<std::string>& live_holders,
                                                           const std::set<std::string>& gone) const {
  std::set<std::string> out(live_holders.begin(), live_holders.end());
  if (auto it = done_.find(iteration); it != done_.end())
    for (auto& [h, d] : it->second)
      out.insert(d.participants.begin(), d.participants.end());
  for (auto& g : gone)
    out.erase(g);
  return {out.begin(), out.end()};
}

bool iteration_barrier::holders_done(std::uint64_t iteration, const std::vector<std::string>& live_holders,
                                     const std::set<std::string>& gone) const {
  auto it = done_.find(iteration);
  if (it == done_.end() || it->second.empty())
    return false;
  for (auto& h : awaited_holders(iteration, live_holders, gone))
    if (it->second.count(h) == 0)
      return false;
  return true;
}

std::map<std::string, wire::iteration_done> iteration_barrier::reports(std::uint64_t iteration) const {
  auto it = done_.find(iteration);
  return it == done_.end() ? std::map<std::string, wire::iteration_done>{} : it->second;
}

void iteration_barrier::share(std::uint64_t iteration, const std::string& replica) {
  shares_[iteration].insert(replica);
}

std::int64_t iteration_barrier::reported_microbatches(std::uint64_t iteration) const {
  std::int64_t n = 0;
  auto it = done_.find(iteration);
  if (it != done_.end())
    for (auto& [h, d] : it->second)
      n += static_cast<std::int64_t>(d.microbatches);
  return n;
}

bool iteration_barrier::shares_complete(std::uint64_t iteration, const std::string& self,
                                        std::int64_t counted) const {
  auto it = shares_.find(iteration);
  if (it == shares_.end() || it->second.count(self) == 0)
    return false;
  auto d = done_.find(iteration);
  if (d == done_.end() || d->second.empty())
    return false;
  // More than reported: a holder died after its microbatches were counted, or one was
  // counted twice (the exactly-once instrumentation reports that); waiting cannot help.
  return counted >= expected(iteration);
}

std::int64_t iteration_barrier::expected(std::uint64_t iteration) const {
  auto v = verdicts_.find(iteration);
  if (v == verdicts_.end())
    return reported_microbatches(iteration);
  std::int64_t n = 0;
  for (auto& [h, mbs] : v->second)
    n += mbs;
  return n;
}

void iteration_barrier::verdict(std::uint64_t iteration, const std::string& from,
                                const std::vector<wire::holder_count>& holders) {
  verdict_from_[iteration].insert(from);
  std::map<std::string, std::uint32_t> named;
  for (auto& h : holders)
    named.emplace(h.holder, h.microbatches);
  auto [it, first] = verdicts_.emplace(iteration, named);
  if (first)
    return;
  for (auto h = it->second.begin(); h != it->second.end();)
    h = named.count(h->first) > 0 ? std::next(h) : it->second.erase(h);
}

const std::map<std::string, std::uint32_t>* iteration_barrier::verdict(std::uint64_t iteration) const {
  auto it = verdicts_.find(iteration);
  return it == verdicts_.end() ? nullptr : &it->second;
}

std::vector<std::string> iteration_barrier::verdicts_awaited(std::uint64_t iteration,
                                                             const std::set<std::string>& gone) const {
  std::vector<std::string> out;
  auto* v = verdict(iteration);
  if (v == nullptr)
    return out;
  auto from = verdict_from_.find(iteration);
  for (auto& [h, mbs] : *v)
    if (gone.count(h) == 0 && (from == verdict_from_.end() || from->second.count(h) == 0))
      out.push_back(h);
  return out;
}

bool iteration_barrier::verdict_settled(std::uint64_t iteration, const std::set<std::string>& gone) const {
  return verdict(iteration) != nullptr && verdicts_awaited(iteration, gone).empty();
}

std::vector<std::string> iteration_barrier::outside_verdict(std::uint64_t iteration,
                                                            const std::map<std::string, std::int64_t>& holders) const {
  std::vector<std::string> out;
  if (auto* v = verdict(iteration))
    for (auto& [h, n] : holders)
      if (n > 0 && v->count(h) == 0)
        out.push_back(h);
  return out;
}

void iteration_barrier::norm(std::uint64_t iteration, std::uint32_t stage, double sum_squares) {
  if (stage < static_cast<std::uint32_t>(stages_))
    norms_[iteration].emplace(stage, sum_squares);
}

std::optional<double> iteration_barrier::global_norm(std::uint64_t iteration) const {
  auto it = norms_.find(iteration);
  if (it == norms_.end() || it->second.size() < static_cast<std::size_t>(stages_))
    return std::nullopt;
  double sum = 0;
  for (auto& [s, v] : it->second)
    sum += v;
  return std::sqrt(sum);
}

std::string iteration_barrier::waiting_for(std::uint64_t iteration, const std::string& self,
                                           const std::vector<std::string>& live_holders,
                                           std::int64_t counted, const std::set<std::string>& gone,
                                           bool relay) const {
  std::string out;
  auto add = [&](const std::string& what) { out += (out.empty() ? "" : "; ") + what; };
  auto d = done_.find(iteration);
  std::string holders;
  for (auto& h : awaited_holders(iteration, live_holders, gone))
    if (d == done_.end() || d->second.count(h) == 0)
      holders += (holders.empty() ? "" : ", ") + h;
  if (!holders.empty())
    add("ITERATION_DONE from " + holders);
  auto s = shares_.find(iteration);
  if (s == shares_.end() || s->second.count(self) == 0)
    add("this replica's share");
  if (relay && verdict(iteration) == nullptr) {
    add("stage 0's verdict (a norm of stage 0)");
  } else if (relay && !verdict_settled(iteration, gone)) {
    std::string from;
    for (auto& h : verdicts_awaited(iteration, gone))
      from += (from.empty() ? "" : ", ") + h;
    add("stage 0's verdict from " + from + " (each holder a verdict names)");
  }
  auto reported = expected(iteration);
  if (counted < reported) {
    std::string from;
    if (s != shares_.end())
      for (auto& r : s->second)
        from += (from.empty() ? "" : ", ") + r;
    add("shares counting " + std::to_string(reported) + " microbatches (" + std::to_string(counted)
        + " in, from " + (from.empty() ? std::string{"nobody"} : from) + ")");
  }
  auto n = norms_.find(iteration);
  std::string stages;
  for (int k = 0; k < stages_; ++k)
    if (n == norms_.end() || n->second.count(static_cast<std::uint32_t>(k)) == 0)
      stages += (stages.empty() ? "" : ", ") + std::to_string(k);
  if (!stages.empty())
    add("norms of stage(s) " + stages);
  return out;
}

void iteration_barrier::finish(std::uint64_t iteration) {
  auto drop = [&](auto& m) { m.erase(m.begin(), m.upper_bound(iteration)); };
  drop(done_);
  drop(shares_);
  drop(norms_);
  drop(verdicts_);
  drop(verdict_from_);
}

} // namespace gwtf::actors
