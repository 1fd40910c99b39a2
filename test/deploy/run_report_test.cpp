// Run reports: the loss and throughput plots of a training run.
#include <doctest/doctest.h>

#include <string>

#include "deploy/run_report.hpp"

using namespace gwtf::deploy;

namespace {

std::size_t count(const std::string& s, const std::string& what) {
  std::size_t n = 0;
  for (auto at = s.find(what); at != std::string::npos; at = s.find(what, at + 1))
    ++n;
  return n;
}

std::vector<iteration_row> rows(int n, int crash_at) {
  std::vector<iteration_row> out;
  for (int i = 0; i < n; ++i) {
    iteration_row r;
    r.iteration = i;
    r.loss = 5.5 - 0.1 * i;
    r.tokens_per_s = 1000 + 10 * i;
    r.crashes = crash_at >= 0 && i >= crash_at ? 1 : 0;
    out.push_back(r);
  }
  return out;
}

} // namespace

TEST_CASE("run report: one point per iteration, a mark where a crash happened, titles escaped") {
  auto svg = loss_svg(rows(12, 5), "loss: 9 hosts <demo> & co");
  CHECK(svg.rfind("<svg ", 0) == 0);
  CHECK(svg.size() > 7);
  CHECK(svg.substr(svg.size() - 7) == "</svg>\n");
  auto poly = svg.find("<polyline");
  REQUIRE(poly != std::string::npos);
  auto points = svg.substr(poly, svg.find("/>", poly) - poly);
  CHECK(count(points, ",") == 12);
  CHECK(count(svg, "stroke-dasharray") == 1); // the one crash
  CHECK(svg.find(">crash</text>") != std::string::npos);
  CHECK(svg.find("9 hosts &lt;demo&gt; &amp; co") != std::string::npos);
  auto calm = throughput_svg(rows(12, -1), "throughput");
  CHECK(count(calm, "stroke-dasharray") == 0);
  CHECK(calm.find(">crash</text>") == std::string::npos);
  CHECK(calm.find(">tokens/s</text>") != std::string::npos);
}
