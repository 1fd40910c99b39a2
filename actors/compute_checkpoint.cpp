// Checkpoints of a replica (docs/checkpoints.md): written after the steps that
// training.checkpoint_every names and after the last one, by a detached writer actor so
// that the file system never stalls the compute; loaded at start when the run resumes.
#include "actors/compute_internal.hpp"

#include "model/checkpoint.hpp"

namespace gwtf::actors {

std::string checkpoint_root(const cluster_spec& spec, const std::string& host) {
  return spec.data_dir.empty() ? std::string{} : spec.data_dir + "/" + host;
}

namespace compute {

namespace {

using write_atom = caf::atom_constant<caf::atom("ckptwrite")>;

// Writes what it is given, one file at a time, and reports each to the host's reporter.
caf::behavior checkpoint_writer(caf::event_based_actor* self, ctx_ptr ctx, compute_actor owner) {
  return {
    [self, ctx, owner](write_atom, std::uint32_t stage, std::uint64_t iteration, std::vector<std::uint8_t>& state) {
      auto start = clock::now();
      model::checkpoint_meta meta{stage, static_cast<std::uint32_t>(ctx->spec->model.stages), iteration,
                                  ctx->spec->checkpoint_hash, ctx->host.name};
      auto root = checkpoint_root(*ctx->spec, ctx->host.name);
      auto why = model::write_checkpoint(root, meta, state, ctx->spec->training.checkpoint_keep);
      if (!why.empty()) {
        tell(self, ctx->reporter, failure_atom::value, ctx->host.name,
             "checkpoint of stage " + std::to_string(stage) + " at iteration " + std::to_string(iteration)
               + " not written: " + why);
        return;
      }
      tell(self, ctx->reporter, checkpoint_atom::value, ctx->host.name, stage, iteration,
           static_cast<std::uint64_t>(state.size()), since(start) * 1000.0,
           model::checkpoint_path(root, stage, iteration));
      self->send(owner, checkpoint_atom::value, iteration);
    },
  };
}

} // namespace

void resume_from_checkpoint(self_ptr self) {
  auto& st = self->state;
  auto root = checkpoint_root(*st.ctx->spec, me(st));
  auto stage = static_cast<std::uint32_t>(st.ctx->stage);
  std::vector<std::string> skipped;
  auto c = root.empty() ? model::checked<model::checkpoint>{std::string{"node.data_dir is not set"}}
                        : model::load_checkpoint(root, stage, st.ctx->spec->checkpoint_hash,
                                                 st.ctx->spec->resume_at, skipped);
  for (auto& s : skipped)
    report_failure(self, "checkpoint " + s);
  std::string why;
  if (auto* cp = std::get_if<model::checkpoint>(&c)) {
    auto r = st.model->import_state(cp->state.data(), cp->state.size());
    if (auto* e = std::get_if<std::string>(&r))
      why = model::checkpoint_path(root, stage, cp->meta.iteration) + ": " + *e;
    else if (static_cast<std::uint64_t>(st.model->steps()) != cp->meta.iteration)
      why = model::checkpoint_path(root, stage, cp->meta.iteration) + ": its state holds "
            + std::to_string(st.model->steps()) + " steps";
  } else {
    why = std::get<std::string>(c);
  }
  if (!why.empty()) {
    // The stage's state comes from a live replica instead, as for any joiner.
    report_failure(self, "cannot resume: " + why + "; joining to download the stage state");
    st.ready = false;
    if (!is_holder(st))
      self->send(st.supervisor, stage_atom::value, std::int32_t{-1});
    return;
  }
  auto& cp = std::get<model::checkpoint>(c);
  st.current = cp.meta.iteration;
  st.first_iteration = st.current;
  st.last_checkpoint = cp.meta.iteration;
  tell(self, st.ctx->reporter, loaded_atom::value, me(st), stage, cp.meta.iteration, st.model->weights_hash(),
       model::checkpoint_path(root, stage, cp.meta.iteration));
}

void maybe_checkpoint(self_ptr self, std::uint64_t i) {
  auto& st = self->state;
  auto& training = st.ctx->spec->training;
  auto steps = i + 1;
  if (training.checkpoint_every <= 0 || st.ctx->spec->data_dir.empty())
    return;
  if (steps % static_cast<std::uint64_t>(training.checkpoint_every) != 0 && steps != st.ctx->spec->end_iteration())
    return;
  if (!st.checkpoint_writer)
    st.checkpoint_writer = self->spawn<caf::detached + caf::linked>(checkpoint_writer, st.ctx, compute_actor{self});
  tell(self, st.checkpoint_writer, write_atom::value, static_cast<std::uint32_t>(st.ctx->stage), steps,
       st.model->export_state());
}

} // namespace compute
} // namespace gwtf::actors
