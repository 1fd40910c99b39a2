#include "app/run/resume.hpp"

#include "app/run/recovery.hpp"
#include "app/run/spec.hpp"
#include "model/checkpoint_cut.hpp"

namespace gwtf::app {

std::variant<std::uint64_t, std::string> resume_point(const actors::cluster_spec& spec, std::optional<std::uint64_t> at,
                                                      std::vector<std::string>& notes) {
  if (spec.data_dir.empty())
    return std::string{"node.data_dir is not set: there are no checkpoints to resume from"};
  // Every host's directory and the replicas kept in them, for every stage: a stage whose
  // replicas all lost their files is still at the cut through its copies elsewhere.
  auto roots = model::roots_under(spec.data_dir, spec.model.stages);
  auto cut = model::find_cut(roots, spec.checkpoint_hash, at, notes);
  if (auto* e = std::get_if<std::string>(&cut))
    return *e + " under " + spec.data_dir + " at any of its hosts";
  return std::get<model::checkpoint_cut>(cut).iteration;
}

std::string prepare_resume(actors::cluster_spec& spec, const run_bounds& request, std::ostream& out) {
  spec.until = request.until;
  if (!request.resume)
    return {};
  std::vector<std::string> notes;
  auto point = resume_point(spec, request.at, notes);
  for (auto& n : notes)
    out << "# checkpoint passed over: " << n << "\n";
  if (auto* e = std::get_if<std::string>(&point))
    return "cannot resume: " + *e;
  spec.resume = true;
  spec.resume_at = std::get<std::uint64_t>(point);
  out << "# resuming at iteration " << *spec.resume_at << " from the checkpoints under " << spec.data_dir
      << (request.at ? " (--resume-at)" : " (the newest iteration every stage has)") << std::endl;
  return {};
}

embedded_result restore_lost_stages(embedded_result result, cluster_config& current,
                                    std::optional<std::uint64_t> until, std::ostream& out, const rerun_fn& rerun) {
  while (result.lost_stage > 0) {
    auto fail = [&](const std::string& why) {
      result.failures.push_back("cannot restore stage " + std::to_string(result.lost_stage) + ": " + why);
      out << "# " << result.failures.back() << std::endl;
    };
    auto plan = plan_recovery(current, result);
    if (auto* e = std::get_if<std::string>(&plan)) {
      fail(*e);
      break;
    }
    auto& p = std::get<recovery_plan>(plan);
    out << "# restoring stage " << result.lost_stage << ": " << p.mover
        << (p.from_stage == result.lost_stage ? " (joining it) loads its checkpoint"
                                              : " moves there from stage " + std::to_string(p.from_stage))
        << "; every stage rolls back to the newest checkpoint every stage has" << std::endl;
    current = std::move(p.cfg);
    auto spec = make_spec(current);
    if (auto err = prepare_resume(*spec, {true, std::nullopt, until}, out); !err.empty()) {
      fail(err);
      break;
    }
    auto at = *spec->resume_at;
    auto next = rerun(current, spec, result.recoveries + 1);
    if (!next)
      break; // interrupted
    result = merge_runs(std::move(result), std::move(*next), at);
  }
  return result;
}

} // namespace gwtf::app
