// ATOM's training semantics in one process (model/reference.hpp, run_atom_reference): whole-model
// peers with local steps and a periodic parameter average, against the reference trainer.
#include <string>
#include <vector>

#include "model/reference.hpp"

#include <doctest/doctest.h> // after torch headers: glog redefines CHECK (toolchain.md)

using namespace gwtf::model;

namespace {

struct setup {
  model_config model;
  training_config training;
  data_config data;
};

setup small(int iterations) {
  setup s;
  s.model.layers = 2;
  s.model.hidden = 32;
  s.model.heads = 4;
  s.model.seq_len = 16;
  s.model.vocab = 256;
  s.model.stages = 2;
  s.training.seed = 9;
  s.training.iterations = iterations;
  s.training.microbatch_size = 2;
  s.training.microbatches_per_holder = 2;
  s.training.warmup_iterations = 2;
  s.training.lr = 3e-3;
  s.data.path = std::string{GWTF_SOURCE_DIR} + "/test/app/good_configs/corpus.txt";
  return s;
}

std::vector<double> atom_losses(const setup& s, int peers, int sync_every) {
  std::vector<double> out;
  auto r = run_atom_reference(s.model, s.training, s.data, peers, sync_every,
                              [&](const reference_report& rep) { out.push_back(rep.loss); });
  REQUIRE_MESSAGE(std::holds_alternative<bool>(r), std::get<std::string>(r));
  return out;
}

} // namespace

TEST_CASE("atom reference: one peer is the reference trainer bit for bit, and peers that average train") {
  auto s = small(12);
  std::vector<double> ref;
  REQUIRE(std::holds_alternative<bool>(
    run_reference(s.model, s.training, s.data, 1, [&](const reference_report& rep) { ref.push_back(rep.loss); })));
  CHECK(atom_losses(s, 1, 1) == ref);
  CHECK(atom_losses(s, 1, 5) == ref);
  // Two peers: the first iteration is the reference's with two holders (the same weights see
  // the same microbatches); after it, how often they average changes the curve, and both fall.
  std::vector<double> ref2;
  REQUIRE(std::holds_alternative<bool>(
    run_reference(s.model, s.training, s.data, 2, [&](const reference_report& rep) { ref2.push_back(rep.loss); })));
  auto every = atom_losses(s, 2, 1);
  auto rarely = atom_losses(s, 2, 4);
  REQUIRE(every.size() == 12);
  REQUIRE(rarely.size() == 12);
  CHECK(every.front() == doctest::Approx(ref2.front()).epsilon(1e-12));
  CHECK(every != rarely);
  CHECK(every.back() < 0.9 * every.front());
  CHECK(rarely.back() < 0.9 * rarely.front());
  CHECK(atom_losses(s, 2, 4) == rarely); // deterministic
}

TEST_CASE("atom reference: no peers or a sync period below one is an error that says so") {
  auto s = small(2);
  auto none = run_atom_reference(s.model, s.training, s.data, 0, 1, [](const reference_report&) {});
  REQUIRE(std::holds_alternative<std::string>(none));
  CHECK(std::get<std::string>(none).find("0 peers") != std::string::npos);
  auto zero = run_atom_reference(s.model, s.training, s.data, 2, 0, [](const reference_report&) {});
  REQUIRE(std::holds_alternative<std::string>(zero));
  CHECK(std::get<std::string>(zero).find("sync_every 0") != std::string::npos);
}
