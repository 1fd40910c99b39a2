#include <doctest/doctest.h>

#include "app/cli.hpp"

#include <sstream>

using namespace gwtf::app;

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

TEST_CASE("cli: sim takes a scenario, routers, a seed and an output directory") {
  auto a = ok({"sim", "--scenario", "s.yaml"});
  CHECK(a.action == cli_action::sim);
  CHECK(a.scenario == "s.yaml");
  CHECK(a.routers == std::vector<std::string>{"gwtf", "swarm", "swarm-restart", "centralized", "atom"});
  CHECK_FALSE(a.seed.has_value());
  auto b = ok({"sim", "--scenario=s.yaml", "--router", "swarm", "--seed=18446744073709551615", "--out", "d"});
  CHECK(b.routers == std::vector<std::string>{"swarm"});
  REQUIRE(b.seed.has_value());
  CHECK(*b.seed == 18446744073709551615ULL);
  CHECK(b.out == "d");
  CHECK(ok({"sim", "--router", "all", "--scenario", "x"}).routers.size() == 5);
  CHECK(ok({"sim", "--router", "swarm-restart", "--scenario", "x"}).routers == std::vector<std::string>{"swarm-restart"});
  CHECK(ok({"sim", "--help"}).action == cli_action::help);
  CHECK(fails({"sim"}) == "sim needs --scenario FILE (see configs/scenarios/) or --from-config FILE (a cluster config)");
  CHECK(fails({"sim", "--scenario"}) == "--scenario needs a file name");
  CHECK(fails({"sim", "--scenario", "a", "--scenario", "b"}) == "--scenario given twice");
  CHECK(fails({"sim", "--scenario", "a", "--router", "ring"}) == "--router: expected gwtf, swarm, swarm-restart, centralized, atom or all, got 'ring'");
  CHECK(fails({"sim", "--scenario", "a", "--router", "gwtf", "--router", "swarm"}) == "--router given twice");
  CHECK(fails({"sim", "--scenario", "a", "--seed", "-1"}) == "--seed: expected a non-negative integer below 2^64, got '-1'");
  CHECK(fails({"sim", "--scenario", "a", "--seed", "18446744073709551616"})
        == "--seed: expected a non-negative integer below 2^64, got '18446744073709551616'");
  CHECK(fails({"sim", "--scenario", "a", "--seed", "1", "--seed", "2"}) == "--seed given twice");
  CHECK(fails({"sim", "--config", "c.yaml"}) == "--config is not an option of sim (it takes --scenario FILE or --from-config FILE)");
  CHECK(fails({"sim", "--scenario", "a", "--fast"}) == "unknown option '--fast' of sim (see --help)");
  CHECK(fails({"sim", "--scenario", "a", "extra"}) == "unexpected argument 'extra' (see --help)");
}

TEST_CASE("cli: sim --from-config takes a cluster config and its overrides, not with a scenario") {
  auto a = ok({"sim", "--from-config", "c.yaml", "--set", "faults.crash_rate=0", "--set=training.iterations=5"});
  CHECK(a.action == cli_action::sim);
  CHECK(a.config == "c.yaml");
  CHECK(a.scenario.empty());
  CHECK(a.sets == std::vector<std::string>{"faults.crash_rate=0", "training.iterations=5"});
  CHECK(a.routers.size() == 5);
  CHECK(fails({"sim", "--from-config", "c.yaml", "--scenario", "s.yaml"}) == "sim takes --scenario FILE or --from-config FILE, not both");
  CHECK(fails({"sim", "--from-config", "a", "--from-config", "b"}) == "--from-config given twice");
  CHECK(fails({"sim", "--scenario", "s.yaml", "--set", "a=1"}) == "--set overrides a cluster config: sim takes it with --from-config FILE");
  auto c = ok({"sim", "--from-config", "c.yaml", "--compute-ms", "1.5,20"});
  REQUIRE(c.compute_ms.has_value());
  CHECK(c.compute_ms->first == doctest::Approx(1.5));
  CHECK(c.compute_ms->second == doctest::Approx(20));
  CHECK_FALSE(a.compute_ms.has_value());
  for (const char* bad : {"1", "1,", ",2", "0,2", "1,-2", "a,b", "1,2,3", "1x,2"})
    CHECK(fails({"sim", "--from-config", "c.yaml", "--compute-ms", bad})
          == std::string{"--compute-ms: expected HOLDER,RELAY milliseconds above 0 (e.g. 1.0,21.5), got '"} + bad + "'");
  CHECK(fails({"sim", "--scenario", "s.yaml", "--compute-ms", "1,2"})
        == "--compute-ms is the compute of a cluster config's hosts: sim takes it with --from-config FILE");
  CHECK(fails({"sim", "--from-config", "c.yaml", "--set", "x"}) == "--set: expected KEY=VALUE (e.g. faults.crash_rate=0), got 'x'");
}

TEST_CASE("cli: compare takes a config, its overrides, routers, seeds, --launch and an output directory") {
  auto a = ok({"compare", "--config", "c.yaml"});
  CHECK(a.action == cli_action::compare);
  CHECK(a.config == "c.yaml");
  CHECK(a.routers == std::vector<std::string>{"gwtf", "swarm"});
  CHECK(a.seeds == 1);
  CHECK_FALSE(a.launch_hosts);
  CHECK(a.out.empty());
  auto b = ok({"compare", "--config=c.yaml", "--routers", "swarm,gwtf", "--seeds=3", "--launch", "--out", "d",
               "--set", "training.iterations=8", "--set=faults.crash_rate=0.1"});
  CHECK(b.routers == std::vector<std::string>{"swarm", "gwtf"});
  CHECK(b.seeds == 3);
  CHECK(b.launch_hosts);
  CHECK(b.out == "d");
  CHECK(b.sets == std::vector<std::string>{"training.iterations=8", "faults.crash_rate=0.1"});
  CHECK(ok({"compare", "--config", "c", "--routers", "swarm"}).routers == std::vector<std::string>{"swarm"});
  CHECK(ok({"compare", "--config", "c", "--routers", "gwtf,atom"}).routers == std::vector<std::string>{"gwtf", "atom"});
  CHECK(ok({"compare", "--help"}).action == cli_action::help);
  CHECK(fails({"compare"}) == "compare needs --config FILE (a cluster config: configs/compare.yaml)");
  CHECK(fails({"compare", "--config", "c", "--routers", "gwtf,centralized"})
        == "--routers: expected gwtf, swarm or atom, got 'centralized' (the simulator's other routers: caf-gwtf sim)");
  CHECK(fails({"compare", "--config", "c", "--routers", "gwtf,gwtf"}) == "--routers: 'gwtf' given twice");
  CHECK(fails({"compare", "--config", "c", "--routers", "gwtf", "--routers", "swarm"}) == "--routers given twice");
  CHECK(fails({"compare", "--config", "c", "--seeds", "0"}) == "--seeds: expected a number of seeds from 1 to 100, got '0'");
  CHECK(fails({"compare", "--config", "c", "--seeds", "1000"}) == "--seeds: expected a number of seeds from 1 to 100, got '1000'");
  CHECK(fails({"compare", "--config", "c", "--config", "d"}) == "--config given twice");
  CHECK(fails({"compare", "--config", "c", "--set", "x"}) == "--set: expected KEY=VALUE (e.g. training.iterations=20), got 'x'");
  CHECK(fails({"compare", "--config", "c", "--check"}) == "unknown option '--check' of compare (see --help)");
  CHECK(fails({"compare", "--config", "c", "extra"}) == "unexpected argument 'extra' (see --help)");
}

TEST_CASE("cli: --set overrides are kept in order, for node, check, launch and reference") {
  auto node = ok({"--config", "a.yaml", "--set", "hosts[0].stage=2", "--set=node.advertise=h:1"});
  CHECK(node.sets == std::vector<std::string>{"hosts[0].stage=2", "node.advertise=h:1"});
  CHECK(ok({"launch", "--config", "a.yaml", "--set", "training.iterations=3"}).sets.size() == 1);
  CHECK(ok({"reference", "--config", "a.yaml", "--set", "training.seed=3"}).sets.size() == 1);
  CHECK(ok({"--config", "a.yaml", "--check", "--set", "node.bootstrap=[]"}).action == cli_action::check);
  CHECK(fails({"--config", "a", "--set"}).rfind("--set needs KEY=VALUE", 0) == 0);
  CHECK(fails({"--config", "a", "--set", "node.listen"})
        == "--set: expected KEY=VALUE (e.g. node.advertise=10.0.0.5:4242), got 'node.listen'");
  CHECK(fails({"--config", "a", "--set", "=3"}).rfind("--set: expected KEY=VALUE", 0) == 0);
}

TEST_CASE("cli: the shell's --cert, --key and --ca go together") {
  auto s = ok({"shell", "h:1", "--cert", "c.crt", "--key=k.key", "--ca", "ca.crt"});
  CHECK(s.cert == "c.crt");
  CHECK(s.key == "k.key");
  CHECK(s.ca == "ca.crt");
  CHECK(fails({"shell", "h:1", "--cert", "c.crt"})
        == "shell: --cert, --key and --ca go together (a certificate of the cluster CA, its key, the CA)");
  CHECK(fails({"shell", "h:1", "--ca", "a", "--ca", "b"}) == "--ca given twice");
  CHECK(fails({"shell", "h:1", "--key"}) == "--key needs a PEM file");
}

TEST_CASE("cli: --resume, --resume-at N and --until N for node, embedded and launch, not reference") {
  auto plain = ok({"--config", "a.yaml"});
  CHECK_FALSE(plain.resume);
  CHECK_FALSE(plain.resume_at.has_value());
  CHECK_FALSE(plain.until.has_value());
  auto resume = ok({"--config", "a.yaml", "--resume"});
  CHECK(resume.resume);
  CHECK_FALSE(resume.resume_at.has_value());
  auto at = ok({"launch", "--config", "a.yaml", "--resume-at=40", "--until", "60"});
  CHECK(at.action == cli_action::launch);
  CHECK(at.resume); // --resume-at implies --resume
  CHECK(at.resume_at == std::optional<std::uint64_t>{40});
  CHECK(at.until == std::optional<std::uint64_t>{60});
  CHECK(fails({"--config", "a.yaml", "--resume-at", "-3"}) == "--resume-at: expected an iteration number, got '-3'");
  CHECK(fails({"--config", "a.yaml", "--until", "x"}) == "--until: expected an iteration number, got 'x'");
  CHECK(fails({"--config", "a.yaml", "--until", "0"}) == "--until: expected at least 1 iteration, got 0");
  CHECK(fails({"--config", "a.yaml", "--until"}) == "--until needs an iteration number (e.g. --until 40)");
  CHECK(fails({"reference", "--config", "a.yaml", "--resume"}) == "unknown option '--resume' (see --help)");
}

TEST_CASE("cli: export and eval take a config, a checkpoint directory and their own outputs") {
  auto e = ok({"export", "--config", "c.yaml", "--checkpoint", "data", "--out", "hf", "--iteration", "12"});
  CHECK(e.action == cli_action::export_hf);
  CHECK(e.config == "c.yaml");
  CHECK(e.checkpoint == "data");
  CHECK(e.out == "hf");
  CHECK(e.iteration == std::optional<std::uint64_t>{12});
  auto v = ok({"eval", "--config=c.yaml", "--checkpoint=data", "--batch-out", "b.json"});
  CHECK(v.action == cli_action::eval);
  CHECK(v.batch_out == "b.json");
  CHECK_FALSE(v.iteration.has_value());
  CHECK(fails({"export", "--config", "c.yaml", "--checkpoint", "data"}) == "export needs --out DIR");
  CHECK(fails({"eval", "--checkpoint", "data"})
        == "eval needs --config FILE (the cluster's config: the model and the checkpoints' hash)");
  CHECK(fails({"eval", "--config", "c.yaml"}) == "eval needs --checkpoint DIR");
  CHECK(fails({"eval", "--config", "c.yaml", "--checkpoint", "d", "--out", "x"}) == "unknown eval option '--out' (see --help)");
  CHECK(fails({"export", "--config", "c.yaml", "--config", "d.yaml"}) == "--config given twice");
  CHECK(fails({"export", "--iteration", "x"}) == "--iteration: expected an iteration number, got 'x'");
}

TEST_CASE("cli: import takes a config, a Hugging Face directory and where to write the checkpoints") {
  auto i = ok({"import", "--config", "c.yaml", "--from", "hf", "--checkpoint", "data"});
  CHECK(i.action == cli_action::import_hf);
  CHECK(i.from == "hf");
  CHECK(i.checkpoint == "data");
  CHECK(fails({"import", "--config", "c.yaml", "--checkpoint", "data"}) == "import needs --from DIR (a Hugging Face model directory)");
  CHECK(fails({"import", "--config", "c.yaml", "--from", "hf", "--checkpoint", "d", "--iteration", "3"})
        == "unknown import option '--iteration' (see --help)");
}

TEST_CASE("cli: a node that follows a restore starts again at the cut, a relay pinned to its stage") {
  using gwtf::app::restore_arguments;
  std::vector<std::string> first{"--config", "r1.yaml", "--set", "node.data_dir=/d", "--join"};
  CHECK(restore_arguments(first, 4, 3)
        == std::vector<std::string>{"--config", "r1.yaml", "--set", "node.data_dir=/d", "--resume-at", "4", "--set",
                                    "hosts[0].stage=3"});
  // A second restore replaces the first one's cut and stage; a data holder gets no stage.
  auto again = restore_arguments(first, 4, 3);
  CHECK(restore_arguments(again, 8, 1)
        == std::vector<std::string>{"--config", "r1.yaml", "--set", "node.data_dir=/d", "--resume-at", "8", "--set",
                                    "hosts[0].stage=1"});
  CHECK(restore_arguments({"--config=dh.yaml", "--resume", "--resume-at=2", "--set=hosts[0].stage=1"}, 6, -1)
        == std::vector<std::string>{"--config=dh.yaml", "--resume-at", "6"});
  // What comes back parses as a node command line.
  auto parsed = gwtf::app::parse_cli(restore_arguments(first, 4, 3));
  REQUIRE(std::holds_alternative<gwtf::app::cli_options>(parsed));
  auto& o = std::get<gwtf::app::cli_options>(parsed);
  CHECK(o.resume);
  CHECK(o.resume_at == std::optional<std::uint64_t>{4});
  CHECK_FALSE(o.join);
  CHECK(o.sets == std::vector<std::string>{"node.data_dir=/d", "hosts[0].stage=3"});
}

TEST_CASE("a run's exit code: 0 when it completed and its checks held, 5 with a violation or a disagreement") {
  std::ostringstream err;
  CHECK(run_exit_code({true, {}, {}, {}}, err) == exit_code::ok);
  CHECK(err.str().empty());
  CHECK(run_exit_code({false, {"r1: stalled"}, {}, {}}, err) == exit_code::failure);
  CHECK(err.str() == "caf-gwtf: r1: stalled\ncaf-gwtf: training did not complete\n");
  err.str("");
  CHECK(run_exit_code({true, {}, {"iteration 3, stage 1: 12 counted twice"}, {}}, err)
        == exit_code::check_failed);
  CHECK(err.str() == "caf-gwtf: exactly-once violation: iteration 3, stage 1: 12 counted twice\n"
                     "caf-gwtf: training completed, but with 1 exactly-once violation(s) and 0 replica disagreement(s) "
                     "(exit code 5)\n");
  err.str("");
  CHECK(run_exit_code({true, {}, {}, {"r2b after iteration 4"}}, err) == exit_code::check_failed);
  CHECK(err.str().find("replica disagreement: r2b after iteration 4") != std::string::npos);
}
