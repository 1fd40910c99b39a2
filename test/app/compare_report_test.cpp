// `caf-gwtf compare`'s figures: per run, per router, the table, the CSV and the plots.
#include <doctest/doctest.h>

#include <string>

#include "app/run/compare_report.hpp"

using namespace gwtf::app;

namespace {

// A run whose iteration i takes seconds[i] at 1000 tokens per iteration.
compare_run run(const std::string& router, std::uint64_t seed, const std::vector<double>& seconds, double final_loss) {
  compare_run r;
  r.router = router;
  r.seed = seed;
  r.completed = true;
  for (std::size_t i = 0; i < seconds.size(); ++i) {
    iteration_row row;
    row.iteration = static_cast<std::int64_t>(i);
    row.seconds = seconds[i];
    row.tokens_per_s = 1000 / seconds[i];
    row.loss = i + 1 == seconds.size() ? final_loss : 5.0;
    r.rows.push_back(row);
  }
  r.compute_s = 10;
  r.wasted_s = 1;
  return r;
}

std::size_t count(const std::string& s, const std::string& what) {
  std::size_t n = 0;
  for (auto at = s.find(what); at != std::string::npos; at = s.find(what, at + 1))
    ++n;
  return n;
}

} // namespace

TEST_CASE("compare: a run's throughput and iteration times leave its first iteration out") {
  auto s = stats_of(run("gwtf", 1, {30, 1, 2, 3, 4}, 2.5)); // iteration 0: startup
  CHECK(s.train_s == doctest::Approx(10));
  CHECK(s.tokens_per_s == doctest::Approx(400)); // 4000 tokens in 10 s
  CHECK(s.p50_s == doctest::Approx(2));
  CHECK(s.p90_s == doctest::Approx(4));
  CHECK(s.wasted_fraction == doctest::Approx(0.1));
  CHECK(s.final_loss == doctest::Approx(2.5));
  CHECK(s.averaging_fraction == 0);
  auto empty = stats_of(compare_run{});
  CHECK(empty.tokens_per_s == 0);
  CHECK(empty.p50_s == 0);
}

TEST_CASE("compare: the averaging's share is the aggregation of iterations 0.. over the time of iterations 1..") {
  auto r = run("gwtf", 1, {30, 2, 2, 4}, 2.5);
  r.rows[0].aggregation_s = 0.5; // within iteration 1's 2 s
  r.rows[1].aggregation_s = 1.0; // within iteration 2's
  r.rows[2].aggregation_s = 1.5; // within iteration 3's
  r.rows[3].aggregation_s = 9.0; // after the last row: not in train_s
  auto s = stats_of(r);
  CHECK(s.train_s == doctest::Approx(8));
  CHECK(s.averaging_fraction == doctest::Approx(3.0 / 8));
  auto sum = summarize({r, run("gwtf", 2, {1, 1}, 2.0)});
  CHECK(sum[0].averaging_fraction == doctest::Approx((3.0 / 8 + 0) / 2));
  CHECK(compare_table(sum).find("  18.8%") != std::string::npos);
  CHECK(compare_csv({r}).find(",0.375,8\n") != std::string::npos); // its own loss: reached at its end
}

TEST_CASE("compare: routers are summed over their seeds in the order the runs name them, with ratios to the first") {
  std::vector<compare_run> runs{run("gwtf", 1, {9, 1, 1}, 2.0), run("swarm", 1, {9, 2, 2}, 2.2),
                                run("gwtf", 2, {9, 1, 3}, 3.0), run("swarm", 2, {9, 2, 6}, 2.8)};
  runs[3].completed = false;
  runs[3].crashes = 2;
  runs[3].violations = 1;
  auto s = summarize(runs);
  REQUIRE(s.size() == 2);
  CHECK(s[0].router == "gwtf");
  CHECK(s[0].runs == 2);
  CHECK(s[0].completed == 2);
  CHECK(s[0].tokens_per_s == doctest::Approx((1000.0 + 500.0) / 2));
  CHECK(s[0].p50_s == doctest::Approx(1)); // pooled {1, 1, 1, 3}
  CHECK(s[0].p90_s == doctest::Approx(3));
  CHECK(s[0].final_loss == doctest::Approx(2.5));
  CHECK(s[1].router == "swarm");
  CHECK(s[1].completed == 1);
  CHECK(s[1].crashes == doctest::Approx(1));
  CHECK(s[1].violations == 1);
  CHECK(s[1].tokens_per_s == doctest::Approx((500.0 + 250.0) / 2));
  auto table = compare_table(s);
  CHECK(table.find("gwtf / swarm: tokens/s 2.00x, p50 iteration time 0.50x, final loss 1.0000x") != std::string::npos);
  CHECK(table.find("\nswarm      1/2") != std::string::npos);
  auto csv = compare_csv(runs);
  CHECK(count(csv, "\n") == 5);
  // seed 2's common loss: gwtf's last 3 (5, 5, 3) average 4.3333; swarm 2's first
  // iteration (loss 5, window of 1) is above it, its second (5, 5) too
  CHECK(csv.find("\nswarm,2,0,3,8,250,2,6,0.1,2,2.8,1,0,0,8\n") != std::string::npos);
}

TEST_CASE("compare: routers that update on different batches compare by their time to the loss every run of the seed reached") {
  auto with_losses = [](const std::string& router, std::vector<double> seconds, std::vector<double> losses) {
    auto r = run(router, 1, seconds, 0);
    for (std::size_t i = 0; i < losses.size(); ++i)
      r.rows[i].loss = losses[i];
    return r;
  };
  // Means of the last 5 losses: a 5, 4.5, 4, 3.5, 3, 2.2, 1.6; b 5 x 5, 4.6, 4.2.
  auto a = with_losses("gwtf", {9, 1, 1, 1, 1, 1, 1}, {5, 4, 3, 2, 1, 1, 1});
  auto b = with_losses("atom", {9, 2, 2, 2, 2, 2, 2}, {5, 5, 5, 5, 5, 3, 3});
  CHECK(common_loss({a, b}, 1) == doctest::Approx(4.2));
  CHECK(common_loss({a, b}, 2) == 0); // no run of seed 2
  CHECK(seconds_to_loss(a, 4.2) == doctest::Approx(2));  // its third iteration: 4; iteration 0 not counted
  CHECK(seconds_to_loss(b, 4.2) == doctest::Approx(12)); // its last
  CHECK(seconds_to_loss(a, 1.0) == -1);                  // never
  CHECK(seconds_to_loss(a, 5.0) == 0);                   // at iteration 0
  // Seed 2: its own common loss (a2 ends at 1.6, b2 at 2.8: 2.8), which a2 reaches at its
  // sixth iteration (2.2: 5 s) and b2 at its end (2.8: 6 x 1 s).
  auto a2 = with_losses("gwtf", {9, 1, 1, 1, 1, 1, 1}, {5, 4, 3, 2, 1, 1, 1});
  auto b2 = with_losses("atom", {9, 1, 1, 1, 1, 1, 1}, {3, 3, 3, 3, 3, 3, 2});
  a2.seed = b2.seed = 2;
  CHECK(common_loss({a, b, a2, b2}, 2) == doctest::Approx(2.8));
  auto s = summarize({a, b, a2, b2});
  CHECK(s[0].to_loss_s == doctest::Approx((2 + 5) / 2.0));
  CHECK(s[1].to_loss_s == doctest::Approx((12 + 6) / 2.0));
  auto table = compare_table(s);
  CHECK(table.find("time to loss 0.39x") != std::string::npos); // 3.5 s / 9 s
  CHECK(compare_csv({a, b}).find(",12\n") != std::string::npos);
}

TEST_CASE("compare: the plots draw one line per run and one legend entry per router") {
  std::vector<compare_run> runs{run("gwtf", 1, {1, 1}, 2.0), run("swarm", 1, {1, 2}, 2.2), run("gwtf", 2, {1, 1}, 2.1)};
  for (auto& svg : {compare_loss_svg(runs, "loss <&>"), compare_throughput_svg(runs, "throughput")}) {
    CHECK(svg.rfind("<svg ", 0) == 0);
    CHECK(count(svg, "<polyline") == 3);
    CHECK(count(svg, "stroke=\"#1f77b4\" stroke-width=\"2\" points") == 2); // gwtf's two runs
    CHECK(count(svg, "stroke=\"#d62728\" stroke-width=\"2\" points") == 1);
    CHECK(svg.find(">gwtf</text>") != std::string::npos);
    CHECK(svg.find(">swarm</text>") != std::string::npos);
  }
  CHECK(compare_loss_svg(runs, "loss <&>").find("loss &lt;&amp;&gt;") != std::string::npos);
}
