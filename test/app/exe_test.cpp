// Runs the real caf-gwtf binary: exit codes and output as a user sees them.
#include <doctest/doctest.h>

#include <array>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <utility>
#include <vector>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "app/config/cluster_config.hpp"
#include "app/run_command.hpp"
#include "node_process.hpp"

namespace {

using gwtf::test::run_result;

run_result run(const std::string& args) {
  return gwtf::test::run_command(std::string{"'"} + GWTF_EXE + "' " + args);
}

const std::string src = GWTF_SOURCE_DIR;

int lines(const std::string& s) {
  int n = 0;
  for (char c : s)
    n += c == '\n';
  return n;
}

} // namespace

TEST_CASE("caf-gwtf --help and --version succeed") {
  auto help = run("--help");
  CHECK(help.code == 0);
  CHECK(help.out.find("usage: caf-gwtf --config FILE") != std::string::npos);
  auto version = run("--version");
  CHECK(version.code == 0);
  for (auto lib : {"CAF 0.17", "LibTorch 1.13", "Cap'n Proto 0.9", "Boost 1.74", "yaml-cpp 0.7", "BLAS"})
    CHECK_MESSAGE(version.out.find(lib) != std::string::npos, lib);
}

TEST_CASE("caf-gwtf: unknown flag or missing file -> one line, exit code 2") {
  auto bad = run("--frobnicate");
  CHECK(bad.code == 2);
  CHECK(lines(bad.out) == 1);
  CHECK(bad.out == "caf-gwtf: unknown option '--frobnicate' (see --help)\n");
  auto missing = run("--config /definitely/not/here.yaml --check");
  CHECK(missing.code == 2);
  CHECK(missing.out == "caf-gwtf: cannot read config '/definitely/not/here.yaml': no such file\n");
  auto none = run("");
  CHECK(none.code == 2);
  CHECK(lines(none.out) == 1);
}

TEST_CASE("caf-gwtf --check: invalid config -> exit 1 with file:line:column and key path") {
  auto path = src + "/test/app/bad_configs/misspelled_key.yaml";
  auto r = run("--config '" + path + "' --check");
  CHECK(r.code == 1);
  CHECK(r.out.find(path + ":8:3: model.layres: unknown key (did you mean 'layers'?)")
        != std::string::npos);
}

TEST_CASE("caf-gwtf --check prints configs/local.yaml resolved, and the output loads again") {
  auto r = run("--config '" + src + "/configs/local.yaml' --check");
  REQUIRE(r.code == 0);
  CHECK(r.out.find("is valid; resolved config:") != std::string::npos);
  CHECK(r.out.find("stage 1: blocks 0-1") != std::string::npos);
  CHECK(r.out.find("flows with every declared host online: at most 8") != std::string::npos);
  auto reloaded = gwtf::app::parse_cluster_config(r.out, "check-output", src + "/configs");
  for (auto& e : reloaded.errors)
    INFO(e.to_string());
  CHECK(reloaded.config.has_value());
}

TEST_CASE("caf-gwtf reference trains and reports every iteration") {
  auto r = run("reference --config '" + src + "/test/app/good_configs/reference_tiny.yaml'");
  INFO(r.out);
  CHECK(r.code == 0);
  CHECK(r.out.find("reference: llama, 1 blocks, d=16, 1 data holder(s) x 2 microbatches") != std::string::npos);
  for (auto line : {"iter     0  loss 5.5", "iter     1  loss", "iter     2  loss"})
    CHECK_MESSAGE(r.out.find(line) != std::string::npos, line);
  CHECK(r.out.find("reference: 3 iterations, mean") != std::string::npos);
}

TEST_CASE("caf-gwtf reference without a data holder fails with the reason") {
  auto file = std::filesystem::temp_directory_path() / ("gwtf-relays-only-" + std::to_string(::getpid()) + ".yaml");
  std::ofstream{file} << "node: {bootstrap: [\"127.0.0.1:4000\"]}\nhosts:\n  - {name: a, role: relay, stage: 1}\n  - {name: b, role: relay, stage: 2}\n";
  auto r = run("reference --config '" + file.string() + "'");
  std::filesystem::remove(file);
  CHECK(r.code == 1);
  CHECK(r.out == "caf-gwtf: reference needs at least one data_holder in hosts (it samples their "
                 "microbatches)\n");
}

TEST_CASE("caf-gwtf sim runs a scenario with every router and writes its outputs") {
  auto dir = std::filesystem::temp_directory_path() / ("gwtf-sim-exe-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  auto r = run("sim --scenario '" + src + "/configs/scenarios/aws-8-churn-0.05.yaml' --seed 3 --out '" + dir.string() + "'");
  INFO(r.out);
  CHECK(r.code == 0);
  CHECK(r.out.find("sim: aws-8-churn-0.05, network aws-8, 27 hosts (3 data holders), 7 stages, 100 iterations") != std::string::npos);
  for (const char* router : {"\ngwtf ", "\nswarm ", "\nswarm-restart ", "\ncentralized "})
    CHECK(r.out.find(router) != std::string::npos);
  for (const char* f : {"summary.csv", "iterations.csv", "result.json", "throughput.svg", "iteration_times.svg"})
    CHECK(std::filesystem::file_size(dir / f) > 0);
  std::filesystem::remove_all(dir);
  auto bad = run("sim --scenario '" + src + "/configs/local.yaml'");
  CHECK(bad.code == 1);
  CHECK(bad.out.find("local.yaml") != std::string::npos);
  CHECK(bad.out.find("unknown key") != std::string::npos);
  auto missing = run("sim --scenario /definitely/not/here.yaml");
  CHECK(missing.code == 2);
  CHECK(missing.out == "caf-gwtf: cannot read scenario '/definitely/not/here.yaml': no such file\n");
}

TEST_CASE("caf-gwtf sim --from-config simulates a cluster config host for host, measured or given its compute") {
  auto dir = std::filesystem::temp_directory_path() / ("gwtf-sim-fc-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  auto r = run("sim --from-config '" + src + "/configs/compare.yaml' --set training.iterations=6 --router gwtf --out '"
               + dir.string() + "'");
  INFO(r.out);
  CHECK(r.code == 0);
  CHECK(r.out.find("a microbatch's forward + backward here (median of 10): data holder ") != std::string::npos);
  CHECK(r.out.find("(replay: --compute-ms ") != std::string::npos);
  CHECK(r.out.find("sim: compare, network aws-8, 11 hosts (2 data holders), 4 stages, 6 iterations x 8 microbatches, "
                   "seed 42") != std::string::npos);
  CHECK(std::filesystem::file_size(dir / "summary.csv") > 0);
  std::filesystem::remove_all(dir);
  // Given compute: the same figures every time.
  auto once = run("sim --from-config '" + src + "/configs/compare.yaml' --compute-ms 1,20 --router swarm --out '"
                  + dir.string() + "'");
  auto again = run("sim --from-config '" + src + "/configs/compare.yaml' --compute-ms 1,20 --router swarm --out '"
                   + dir.string() + "'");
  CHECK(once.code == 0);
  CHECK(once.out.find("data holder 1.00 ms, relay stage 20.00 ms") != std::string::npos);
  // The same but for the wall time a run took ("simulated 76.9 s of training in 0.01 s").
  auto simulated = [](const std::string& out) {
    return std::regex_replace(out, std::regex{"of training in [0-9.]+ s"}, "of training in (wall time) s");
  };
  CHECK(simulated(once.out).find("of training in (wall time) s") != std::string::npos);
  CHECK(simulated(once.out) == simulated(again.out));
  std::filesystem::remove_all(dir);
  auto bad = run("sim --from-config '" + src + "/configs/compare.yaml' --compute-ms 1,20 --set 'faults.script=[{at_iteration: 1, "
                 "action: hang, host: r1-ohio, duration_ms: 10}]'");
  CHECK(bad.code == 1);
  CHECK(bad.out.find("faults.script[0].action: crash, leave, join or slow_link: the simulator has no hang") != std::string::npos);
}

TEST_CASE("caf-gwtf compare trains a config with both routers and writes its table, CSV, plots and logs") {
  auto dir = std::filesystem::temp_directory_path() / ("gwtf-compare-exe-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  auto r = run("compare --config '" + src + "/configs/local.yaml' --set training.iterations=3 --set 'faults.script=[]'"
               " --set emulation.time_scale=0.02 --out '" + dir.string() + "'");
  INFO(r.out);
  CHECK(r.code == 0);
  CHECK(r.out.find("compare: run 1/2: gwtf, seed 42, embedded") != std::string::npos);
  CHECK(r.out.find("compare: run 2/2: swarm, seed 42, embedded") != std::string::npos);
  CHECK(r.out.find("compare: swarm, seed 42: completed, 3 iterations") != std::string::npos);
  CHECK(r.out.find("\ngwtf       1/1") != std::string::npos);
  CHECK(r.out.find("\nswarm      1/1") != std::string::npos);
  CHECK(r.out.find("gwtf / swarm: tokens/s ") != std::string::npos);
  for (const char* f : {"compare.csv", "compare-loss.svg", "compare-throughput.svg", "gwtf-seed42.csv", "gwtf-seed42.log",
                        "swarm-seed42.csv", "swarm-seed42.log"})
    CHECK_MESSAGE(std::filesystem::file_size(dir / f) > 0, f);
  std::ifstream csv{dir / "compare.csv"};
  std::string header, gwtf, swarm;
  std::getline(csv, header);
  std::getline(csv, gwtf);
  std::getline(csv, swarm);
  CHECK(gwtf.rfind("gwtf,42,1,3,", 0) == 0);
  CHECK(swarm.rfind("swarm,42,1,3,", 0) == 0);
  // Each iteration's averaging (aggregation_s, the last column) is measured, and lies within
  // the next iteration's time (seconds, the column before).
  std::ifstream rows{dir / "gwtf-seed42.csv"};
  std::string line;
  std::getline(rows, line);
  CHECK(line == "iteration,loss,tokens_per_s,flows,hosts_alive,crashes,wasted_fraction,seconds,aggregation_s");
  std::vector<std::pair<double, double>> seconds_aggregation;
  while (std::getline(rows, line)) {
    auto last = line.rfind(',');
    auto before = line.rfind(',', last - 1);
    seconds_aggregation.emplace_back(std::stod(line.substr(before + 1, last - before - 1)), std::stod(line.substr(last + 1)));
  }
  REQUIRE(seconds_aggregation.size() == 3);
  for (std::size_t i = 0; i + 1 < seconds_aggregation.size(); ++i) {
    INFO("iteration " << i);
    CHECK(seconds_aggregation[i].second > 0);
    CHECK(seconds_aggregation[i].second < seconds_aggregation[i + 1].first);
  }
  std::filesystem::remove_all(dir);
  // A config one router cannot run is refused before any run, naming the router.
  auto refused = run("compare --config '" + src + "/configs/local.yaml' --set compression.mode=adaptive --out '"
                     + dir.string() + "'");
  CHECK(refused.code == 1);
  CHECK(refused.out.find("caf-gwtf: compare: the config cannot run with routing.router swarm: compression.mode: adaptive")
        != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(dir));
}

TEST_CASE("caf-gwtf node: a node.metrics port that is taken stops the host before it joins, naming key and address") {
  namespace fs = std::filesystem;
  // Hold a port: what another process on the machine would do.
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  REQUIRE(::listen(fd, 1) == 0);
  socklen_t len = sizeof a;
  REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0);
  auto taken = "127.0.0.1:" + std::to_string(ntohs(a.sin_port));
  auto dir = fs::temp_directory_path() / ("gwtf-exe-metrics-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::ofstream{dir / "host.yaml"} << "node: {listen: \"127.0.0.1:0\", metrics: \"" << taken << "\"}\n"
                                   << "hosts:\n  - {name: r1, role: relay, stage: 1}\n"
                                   << "training: {data_holders: [dh]}\n";
  auto r = run("--config '" + (dir / "host.yaml").string() + "'");
  ::close(fd);
  INFO(r.out);
  CHECK(r.code == 1);
  CHECK(r.out.find("caf-gwtf: node.metrics: cannot listen on " + taken + ": ") != std::string::npos);
  CHECK(r.out.find("listening on") == std::string::npos); // it never started
  fs::remove_all(dir);
}

TEST_CASE("scripts/tokenize writes GPT-2 BPE and SentencePiece ids as nanoGPT .bin that a config accepts") {
  namespace fs = std::filesystem;
  auto dir = fs::temp_directory_path() / ("gwtf-tokenize-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::ofstream{dir / "in.txt"} << "Hello world";
  auto r = gwtf::test::run_command(src + "/scripts/tokenize gpt2 '" + (dir / "in.txt").string() + "' '"
                                   + (dir / "gpt2.bin").string() + "'");
  INFO(r.out);
  REQUIRE(r.code == 0);
  // GPT-2's encoding of "Hello world": 15496, 995, little-endian uint16.
  std::ifstream bin{dir / "gpt2.bin", std::ios::binary};
  std::string bytes{std::istreambuf_iterator<char>{bin}, {}};
  CHECK(bytes == std::string{"\x88\x3c\xe3\x03", 4});
  // SentencePiece on a real corpus; every id below the vocab asked for, and the model trains
  // from it under a config of that vocab (--check validates the token file against it).
  auto spm = gwtf::test::run_command(src + "/scripts/tokenize spm /usr/share/games/fortunes/cookie '"
                                     + (dir / "spm.bin").string() + "' 1000");
  INFO(spm.out);
  REQUIRE(spm.code == 0);
  auto size = fs::file_size(dir / "spm.bin");
  CHECK(size > 20000);
  CHECK(size % 2 == 0);
  std::ifstream sbin{dir / "spm.bin", std::ios::binary};
  std::string ids{std::istreambuf_iterator<char>{sbin}, {}};
  std::size_t above = 0;
  for (std::size_t i = 0; i + 1 < ids.size(); i += 2)
    above += (static_cast<unsigned char>(ids[i]) | (static_cast<unsigned char>(ids[i + 1]) << 8)) >= 1000 ? 1 : 0;
  CHECK(above == 0);
  auto check = run(std::string{"--config '"} + src + "/configs/llama-350m.yaml' --check --set data.format=tokens --set data.path='"
                   + (dir / "spm.bin").string() + "'");
  INFO(check.out.substr(0, 2000));
  CHECK(check.code == 0);
  CHECK(gwtf::test::run_command(src + "/scripts/tokenize spm '" + (dir / "in.txt").string() + "' '"
                                + (dir / "x.bin").string() + "' 70000").code == 2);
  fs::remove_all(dir);
}

TEST_CASE("caf-gwtf: the embedded cluster stopped by SIGTERM stops its hosts and prints its summary") {
  auto dir = std::filesystem::temp_directory_path() / ("gwtf-sigterm-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  gwtf::test::node_process run;
  REQUIRE(run.start_argv({GWTF_EXE, "--config", src + "/configs/local.yaml", "--set", "training.iterations=500", "--set",
                          "training.loss_out=" + (dir / "loss.csv").string()},
                         dir / "run.log"));
  auto log = run.wait_for("iter    1 |", std::chrono::seconds(120));
  REQUIRE_MESSAGE(log.find("iter    1 |") != std::string::npos, log);
  REQUIRE(::kill(run.pid, SIGTERM) == 0);
  int code = run.wait_exit(std::chrono::seconds(60));
  log = gwtf::test::read_file(dir / "run.log");
  INFO(log);
  CHECK(code == 1); // the run did not complete: a failure, not a signal death (143)
  CHECK(log.find("# interrupted (SIGTERM): stopping the hosts") != std::string::npos);
  CHECK(log.find("# summary: ") != std::string::npos);
  CHECK(log.find("caf-gwtf: interrupted by SIGTERM") != std::string::npos);
  CHECK(log.find("caf-gwtf: training did not complete") != std::string::npos);
  CHECK(std::filesystem::file_size(dir / "loss.csv") > 0); // what was trained is written
  std::filesystem::remove_all(dir);
}
