#include <doctest/doctest.h>

#include "validation_helpers.hpp"

#include <map>
#include <string>

#include "routing/routing_config.hpp"

using namespace gwtf::routing;

using gwtf::test::issues_of;

TEST_CASE("routing config: defaults follow the paper and are valid") {
  routing_config c;
  CHECK(issues_of(c).empty());
  CHECK(c.gwtf.tick_ms == 2000);
  CHECK(c.gwtf.initial_temperature == doctest::Approx(1.7));
  CHECK(c.gwtf.cooling == doctest::Approx(0.95));
  CHECK(c.swarm.refresh_ms == 30000);
  CHECK(c.swarm.backward_factor == doctest::Approx(2.5));
}

TEST_CASE("routing config: each bad value is reported under its own key") {
  routing_config c;
  c.gwtf.cooling = 1.2;
  c.gwtf.min_temperature = 5; // above initial_temperature
  c.gwtf.swap_probability = -0.1;
  c.gwtf.tick_ms = 0;
  c.swarm.ema_alpha = 0;
  auto issues = issues_of(c);
  CHECK(issues.size() == 5);
  CHECK(issues.count("gwtf.cooling") == 1);
  CHECK(issues["gwtf.min_temperature"].find("at most initial_temperature") != std::string::npos);
  CHECK(issues.count("gwtf.swap_probability") == 1);
  CHECK(issues.count("gwtf.tick_ms") == 1);
  CHECK(issues.count("swarm.ema_alpha") == 1);
}
