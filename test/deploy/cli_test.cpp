#include <doctest/doctest.h>

#include "deploy/cli.hpp"

using namespace gwtf::deploy;

namespace {

cli_options ok(std::vector<std::string> args) {
  auto r = parse_cli(args);
  REQUIRE(std::holds_alternative<cli_options>(r));
  return std::get<cli_options>(r);
}

std::string fails(std::vector<std::string> args) {
  auto r = parse_cli(args);
  REQUIRE(std::holds_alternative<cli_error>(r));
  return std::get<cli_error>(r).message;
}

} // namespace

TEST_CASE("cli: modes") {
  CHECK(ok({"--help"}).action == cli_action::help);
  CHECK(ok({"-h"}).action == cli_action::help);
  CHECK(ok({"--version"}).action == cli_action::version);
  auto check = ok({"--config", "a.yaml", "--check"});
  CHECK(check.action == cli_action::check);
  CHECK(check.config == "a.yaml");
  auto node = ok({"--config=b.yaml"});
  CHECK(node.action == cli_action::node);
  CHECK(node.config == "b.yaml");
  auto ref = ok({"reference", "--config", "c.yaml"});
  CHECK(ref.action == cli_action::reference);
  CHECK(ref.config == "c.yaml");
  // --help wins over everything else, as users expect from any tool.
  CHECK(ok({"--config", "a.yaml", "--help"}).action == cli_action::help);
}

TEST_CASE("cli: errors are one line and name the culprit") {
  CHECK(fails({}) == "missing --config FILE (see --help)");
  CHECK(fails({"--bogus"}) == "unknown option '--bogus' (see --help)");
  CHECK(fails({"--config"}) == "--config needs a file name");
  CHECK(fails({"--config="}) == "--config needs a file name");
  CHECK(fails({"--config", "a", "--config", "b"}) == "--config given twice");
  CHECK(fails({"--check"}) == "--check needs --config FILE");
  CHECK(fails({"stray"}) == "unexpected argument 'stray' (see --help)");
  CHECK(fails({"reference"}) == "missing --config FILE (see --help)");
  CHECK(fails({"--config", "c", "reference"}) == "unexpected argument 'reference' (see --help)");
  CHECK(fails({"reference", "--config", "c", "--check"})
        == "--check is not an option of reference (validate with: --config FILE --check)");
  for (auto& msg : {fails({"--bogus"}), fails({"--config"})})
    CHECK(msg.find('\n') == std::string::npos);
}
