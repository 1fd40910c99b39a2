// Run reports: the loss and throughput plots of a training run.
#include <doctest/doctest.h>

#include <string>

#include "app/run/run_report.hpp"

using namespace gwtf::app;

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

TEST_CASE("run report: the final flow graph groups hosts by stage and draws one edge per hop and holder") {
  std::map<std::string, std::string> flows{
    {"dh-a", R"({"host":"dh-a","stage":0,"flows":[{"id":1,"holder":"dh-a","prev":"r2","next":"r1","built":true},
                                                   {"id":2,"holder":"dh-a","prev":"r2","next":"r1","built":true}]})"},
    {"r1", R"({"host":"r1","stage":1,"flows":[{"id":1,"holder":"dh-a","prev":"dh-a","next":"r2","built":true,"ring_cost_s":0.5},
                                               {"id":2,"holder":"dh-a","prev":"dh-a","next":"r2","built":true,"ring_cost_s":0.7},
                                               {"id":3,"holder":"dh-b","prev":"dh-b","next":"r2","built":false}]})"},
    {"r2", R"({"host":"r2","stage":2,"flows":[{"id":1,"holder":"dh-a","prev":"r1","next":"dh-a","built":true}]})"},
    {"r\"x", "not json"}};
  auto dot = gwtf::app::flows_dot(flows, "final flows: 4 hosts");
  INFO(dot);
  CHECK(dot.rfind("digraph flows {", 0) == 0);
  CHECK(dot.find("label=\"final flows: 4 hosts\"") != std::string::npos);
  CHECK(dot.find("subgraph \"cluster_stage_1\"") != std::string::npos);
  CHECK(dot.find("label=\"data holders\"") != std::string::npos);
  // Two flows of dh-a from r1 to r2: one edge, their mean ring cost.
  CHECK(dot.find("\"r1\" -> \"r2\" [label=\"dh-a x2, ring 0.600 s\"") != std::string::npos);
  CHECK(dot.find("\"dh-a\" -> \"r1\" [label=\"dh-a x2\"") != std::string::npos);
  CHECK(dot.find("\"r2\" -> \"dh-a\" [label=\"dh-a x1\"") != std::string::npos);
  CHECK(dot.find("dh-b") == std::string::npos); // half-built: carries nothing yet
  CHECK(dot.find("// r\"x: its flows could not be read") != std::string::npos);
  CHECK(dot.find("\"r\\\"x\";") != std::string::npos); // drawn, quoted
  CHECK(dot.back() == '\n');
}
