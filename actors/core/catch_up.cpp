#include "actors/core/catch_up.hpp"

namespace gwtf::actors {

std::vector<wire::message> catch_up_messages(const catch_up_state& s) {
  std::vector<wire::message> out;
  if (s.last_done && s.last_done->iteration == s.current)
    out.emplace_back(*s.last_done);
  if (s.norms)
    for (auto n = s.norms->lower_bound(s.current > 0 ? s.current - 1 : 0); n != s.norms->end(); ++n)
      out.emplace_back(n->second);
  if (!s.same_stage)
    return out;
  if (s.last_share && s.last_share->iteration + 1 == s.current)
    out.emplace_back(*s.last_share);
  if (s.current_share)
    out.emplace_back(*s.current_share);
  if (s.last_hash)
    out.emplace_back(*s.last_hash);
  return out;
}

} // namespace gwtf::actors
