// ATOM's training semantics in one process (model/reference.hpp, run_atom_reference): whole-model
// peers with local steps and a periodic parameter average, against the reference trainer. And
// the whole-model peer (model/atom_peer.hpp): driven as run_atom_reference drives its peers it
// trains the same curve; swapped it computes bit for bit what it does in memory; an average
// that lands after local steps keeps them.
#include <filesystem>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "model/atom_peer.hpp"
#include "model/reference.hpp"

#include <doctest/doctest.h> // after torch headers: glog redefines CHECK (toolchain.md)

using namespace gwtf::model;

namespace {

struct setup {
  model_config model;
  training_config training;
  data_config data;
};

// `relay_stages` of two blocks each.
setup small(int iterations, int relay_stages = 1) {
  setup s;
  s.model.layers = 2 * relay_stages;
  s.model.hidden = 32;
  s.model.heads = 4;
  s.model.seq_len = 16;
  s.model.vocab = 256;
  s.model.stages = relay_stages + 1;
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

template <class T>
T ok(outcome<T>&& r) {
  if (auto* e = std::get_if<std::string>(&r))
    FAIL(*e);
  return std::get<T>(std::move(r));
}

// run_atom_reference's loop over atom_peers: iteration i, peer p trains holder p's
// microbatches and steps; every sync_every iterations (and after the last) the peers'
// contributions are averaged (weighted by microbatches: equal here) and land.
std::vector<double> drive(const setup& s, std::vector<atom_peer>& peers, int sync_every) {
  auto text = std::get<corpus>(corpus::open(s.data, s.model.vocab, s.model.seq_len));
  std::vector<double> losses;
  for (std::int64_t it = 0; it < s.training.iterations; ++it) {
    double sum = 0;
    int count = 0;
    for (std::size_t p = 0; p < peers.size(); ++p) {
      for (int i = 0; i < s.training.microbatches_per_holder; ++i) {
        microbatch_id id{static_cast<std::uint64_t>(it), static_cast<std::uint32_t>(p), static_cast<std::uint32_t>(i)};
        sum += ok(peers[p].train(id.key(), sample(text, s.training.seed, id, s.training.microbatch_size, s.model.seq_len)));
        ++count;
      }
      ok(peers[p].step(it));
    }
    if ((it + 1) % sync_every == 0 || it + 1 == s.training.iterations) {
      std::vector<std::pair<std::int64_t, torch::Tensor>> sent;
      for (auto& peer : peers)
        sent.emplace_back(s.training.microbatches_per_holder, peer.contribution());
      auto avg = ok(average_parameters(sent));
      for (std::size_t p = 0; p < peers.size(); ++p)
        ok(peers[p].land(avg, sent[p].second));
    }
    losses.push_back(sum / count);
  }
  return losses;
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

TEST_CASE("atom peer: two whole-model peers averaging every 3 steps train run_atom_reference's curve bit for bit") {
  auto s = small(7, 2);
  std::vector<double> expected;
  REQUIRE(std::holds_alternative<bool>(run_atom_reference(
    s.model, s.training, s.data, 2, 3, [&](const reference_report& rep) { expected.push_back(rep.loss); })));
  std::vector<atom_peer> peers;
  peers.emplace_back(s.model, s.training);
  peers.emplace_back(s.model, s.training);
  CHECK(peers[0].weights_hash() == peers[1].weights_hash());
  auto got = drive(s, peers, 3);
  CHECK(got == expected); // two peers: (a + b) / 2 rounds alike in fp32 and fp64
  CHECK(peers[0].weights_hash() == peers[1].weights_hash()); // averaged after the last
  CHECK(got.back() < got.front());
}

TEST_CASE("atom peer: relay stages swapped through a budget train bit for bit what they train in memory") {
  auto s = small(4, 2);
  auto dir = std::filesystem::temp_directory_path().string();
  std::vector<atom_peer> memory, swapped;
  for (int p = 0; p < 2; ++p) {
    memory.emplace_back(s.model, s.training);
    swapped.emplace_back(s.model, s.training, swap_options{1, dir}); // one block resident per relay stage
  }
  CHECK(memory[0].resident_blocks() == 0);
  CHECK(swapped[0].resident_blocks() == 2);
  auto a = drive(s, memory, 2);
  auto b = drive(s, swapped, 2);
  CHECK(a == b);
  CHECK(memory[0].weights_hash() == swapped[0].weights_hash());
  CHECK(torch::equal(memory[1].contribution(), swapped[1].contribution()));
}

TEST_CASE("atom peer: an average that lands after local steps keeps what they changed") {
  auto s = small(3, 2);
  atom_peer a{s.model, s.training}, b{s.model, s.training};
  auto text = std::get<corpus>(corpus::open(s.data, s.model.vocab, s.model.seq_len));
  auto train_step = [&](atom_peer& peer, std::uint32_t holder, std::int64_t it) {
    microbatch_id id{static_cast<std::uint64_t>(it), holder, 0};
    ok(peer.train(id.key(), sample(text, s.training.seed, id, s.training.microbatch_size, s.model.seq_len)));
    ok(peer.step(it));
  };
  train_step(a, 0, 0);
  train_step(b, 1, 0);
  auto sent_a = a.contribution(), sent_b = b.contribution();
  auto avg = ok(average_parameters({{1, sent_a}, {3, sent_b}})); // weighted by microbatches
  CHECK(torch::allclose(avg, (sent_a + 3 * sent_b) / 4, 1e-6, 1e-7));
  train_step(a, 0, 1); // overlap: a step on the weights before the average
  auto delta = a.contribution() - sent_a;
  ok(a.land(avg, sent_a));
  CHECK(torch::allclose(a.contribution(), avg + delta, 1e-6, 1e-7));
  ok(b.land(avg, sent_b)); // no step since: exactly the average
  CHECK(torch::equal(b.contribution(), avg));
  // Refused: nothing, a count below one, other shapes; a wrong-sized average changes nothing.
  CHECK(std::holds_alternative<std::string>(average_parameters({})));
  CHECK(std::holds_alternative<std::string>(average_parameters({{0, sent_a}})));
  CHECK(std::holds_alternative<std::string>(average_parameters({{1, sent_a}, {1, sent_a.narrow(0, 0, 5)}})));
  auto before = b.contribution();
  auto bad = b.land(avg.narrow(0, 0, 5), sent_b);
  REQUIRE(std::holds_alternative<std::string>(bad));
  CHECK(std::get<std::string>(bad).find("fp32 values") != std::string::npos);
  CHECK(torch::equal(b.contribution(), before));
}
