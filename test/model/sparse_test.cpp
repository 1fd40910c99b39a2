#include <doctest/doctest.h>

#include <torch/torch.h>

#include "model/sparse.hpp"

using namespace gwtf::model;

TEST_CASE("top-k keeps the largest magnitudes in increasing positions and densifies back") {
  auto t = torch::tensor({0.5f, -4.0f, 0.25f, 3.0f, -0.125f, 2.0f}).reshape({2, 3});
  auto s = top_k(t, 4, torch::kFloat); // two per row
  CHECK(s.indices == std::vector<std::uint32_t>({0, 1, 3, 5}));
  CHECK(s.values.equal(torch::tensor({0.5f, -4.0f, 3.0f, 2.0f})));
  auto back = densify(s.values, s.indices, {2, 3});
  CHECK(back.equal(torch::tensor({0.5f, -4.0f, 0.0f, 3.0f, 0.0f, 2.0f}).reshape({2, 3})));
  // A row of small values keeps its share: no token arrives as all zeros.
  auto skewed = torch::tensor({100.0f, 300.0f, 200.0f, 0.001f, 0.003f, -0.002f}).reshape({2, 3});
  CHECK(top_k(skewed, 2, torch::kFloat).indices == std::vector<std::uint32_t>({1, 4}));
  CHECK(top_k(skewed, 3, torch::kFloat).indices == std::vector<std::uint32_t>({1, 2, 4, 5})); // ceil(3 / 2) each
  // keep is clamped to the tensor; everything kept is the tensor itself.
  auto all = top_k(t, 99, torch::kFloat);
  CHECK(all.indices.size() == 6);
  CHECK(densify(all.values, all.indices, {2, 3}).equal(t));
  CHECK(top_k(t, 0, torch::kFloat).indices.empty());
  CHECK(densify(torch::empty({0}), {}, {2, 3}).equal(torch::zeros({2, 3})));
}

TEST_CASE("error feedback conserves the dropped mass over a run of tensors") {
  torch::manual_seed(7);
  torch::Tensor residual;
  auto sent = torch::zeros({4, 16, 8});
  auto given = torch::zeros({4, 16, 8});
  auto sent_without = torch::zeros({4, 16, 8}); // the same tensors without error feedback
  for (int step = 0; step < 20; ++step) {
    auto g = torch::randn({4, 16, 8});
    auto plain = top_k(g, 51, torch::kHalf);
    sent_without += densify(plain.values, plain.indices, {4, 16, 8});
    auto before = residual.defined() ? residual.clone() : torch::zeros_like(g);
    auto s = top_k(g, 51, torch::kHalf, &residual); // 10% kept, values in fp16
    REQUIRE((s.values.scalar_type() == torch::kHalf));
    auto rebuilt = densify(s.values, s.indices, {4, 16, 8});
    // What was sent and what stays equal what was given plus what was owed.
    CHECK(torch::allclose(rebuilt + residual, g + before, 1e-6, 1e-6));
    sent += rebuilt;
    given += g;
  }
  // Over the run: everything given was sent or is still owed, nothing lost.
  CHECK(torch::allclose(sent + residual, given, 1e-4, 1e-4));
  // The sum of what arrived is much closer to the sum given than without error feedback.
  auto err_ef = (given - sent).norm().item<double>();
  auto err_plain = (given - sent_without).norm().item<double>();
  CAPTURE(err_ef);
  CAPTURE(err_plain);
  CHECK(err_ef < 0.5 * err_plain);
}

TEST_CASE("top-k with a residual of another shape ignores it (a link's first tensor)") {
  auto t = torch::tensor({1.0f, -2.0f, 3.0f});
  torch::Tensor residual = torch::ones({5});
  auto s = top_k(t, 1, torch::kFloat, &residual);
  CHECK(s.indices == std::vector<std::uint32_t>({2}));
  CHECK(residual.equal(torch::tensor({1.0f, -2.0f, 0.0f})));
}
