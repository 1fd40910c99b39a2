// The exactly-once check of a run, outside the mechanism it checks: per iteration, the
// microbatch keys that the replicas whose gradients were averaged report having counted, per
// stage. Every stage must count the same microbatches, each once, and those must include
// every microbatch of each data holder that lived through the iteration. A holder that died
// before its microbatches were counted at stage 0 takes them with it (they are its data), but
// then no stage may count them. Pure (no CAF): the launch and embedded drivers call it, and
// it is tested directly.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace gwtf::app {

/// Microbatch keys each replica reported for one stage and iteration.
using share_reports = std::map<std::string, std::vector<std::uint64_t>>;

/// One stage's iteration: the replicas whose shares were averaged, and every replica's keys.
struct stage_counts {
  std::vector<std::string> contributors;
  share_reports reports;              ///< the latest report of each replica
  std::vector<std::uint64_t> digests = {}; ///< per contributor, the key digest of its share that was averaged
};

/// Whether every contributor in `live` has reported the keys of the very share that was
/// averaged (its report's key digest is the averaged share's). A relay that shared again
/// after stage 0's verdict (without a dead holder's microbatches) sent a second report, and
/// the first, stale one may be all the checker has: the second crosses from another process
/// than the data holders' reports that make the check due. Contributors not in `live` (gone)
/// are not waited for; neither is a contributor without a digest.
bool reports_settled(const stage_counts& c, const std::set<std::string>& live);

/// What `iteration` got wrong, one line per stage at fault; empty when nothing. `holders`:
/// the roster (holder index order); `finished`: microbatches each holder reported finished
/// (holders without a report are skipped); `lived`: the holders that applied the iteration
/// (their finished microbatches must be counted everywhere); `stages`: the stages averaged.
/// A stage is at fault when it counted a microbatch twice, left out one of a holder in
/// `lived`, or counted one that another stage did not. A stage with an averaged contributor
/// whose report is missing (a process killed before its report left) is checked for double
/// counts only.
std::vector<std::string> exactly_once_violations(std::uint64_t iteration, const std::vector<std::string>& holders,
                                                 const std::map<std::string, std::uint32_t>& finished,
                                                 const std::set<std::string>& lived,
                                                 const std::map<std::uint32_t, stage_counts>& stages);

/// training.mode atom (docs/atom.md): what the average of the round of iterations [first,
/// end) got wrong, one line per peer at fault; empty when nothing. Each contributor's report
/// must hold its own microbatches only (data-holder index = its place in `holders`), of
/// iterations inside the round, every index below `per_iteration` of each such iteration
/// once; a contributor whose report is missing (killed before it left) is not checked; every
/// peer in `lived` (it landed the round) must be a contributor: its microbatches count.
std::vector<std::string> atom_exactly_once_violations(std::uint64_t first, std::uint64_t end,
                                                      const std::vector<std::string>& holders, int per_iteration,
                                                      const stage_counts& round, const std::set<std::string>& lived);

} // namespace gwtf::app
