#include "app/cli.hpp"

#include <algorithm>
#include <ostream>
#include <sstream>

namespace gwtf::app {

std::vector<std::string> restore_arguments(const std::vector<std::string>& args, std::uint64_t iteration,
                                           std::int32_t stage) {
  const std::string pinned = "hosts[0].stage=";
  std::vector<std::string> out;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const auto& a = args[i];
    if (a == "--join" || a == "--resume" || a.rfind("--resume-at=", 0) == 0)
      continue;
    if (a == "--resume-at") {
      ++i; // and its value
      continue;
    }
    if (a.rfind("--set=" + pinned, 0) == 0)
      continue;
    if (a == "--set" && i + 1 < args.size() && args[i + 1].rfind(pinned, 0) == 0) {
      ++i;
      continue;
    }
    out.push_back(a);
  }
  out.push_back("--resume-at");
  out.push_back(std::to_string(iteration));
  if (stage >= 0) {
    out.push_back("--set");
    out.push_back(pinned + std::to_string(stage));
  }
  return out;
}

std::string usage_text() {
  return "usage: caf-gwtf --config FILE [--set KEY=VALUE]... [--check] [--join] [--resume | --resume-at N] [--until N]\n"
         "       caf-gwtf launch --config FILE [--set KEY=VALUE]... [--logs DIR] [--resume | --resume-at N] [--until N]\n"
         "       caf-gwtf reference --config FILE [--set KEY=VALUE]...\n"
         "       caf-gwtf compare --config FILE [--set KEY=VALUE]... [--routers gwtf,swarm,atom] [--seeds N] [--launch] [--out DIR]\n"
         "       caf-gwtf sim --scenario FILE [--router NAME|all] [--seed N] [--out DIR]\n"
         "       caf-gwtf sim --from-config FILE [--set KEY=VALUE]... [--compute-ms H,R] [--router NAME|all] [--seed N] [--out DIR]\n"
         "       caf-gwtf shell HOST:PORT [-c COMMAND] [--json] [--timeout-ms N] [--cert F --key F --ca F]\n"
         "       caf-gwtf export --config FILE --checkpoint DIR --out DIR [--iteration N]\n"
         "       caf-gwtf eval --config FILE --checkpoint DIR [--iteration N] [--batch-out FILE]\n"
         "       caf-gwtf import --config FILE --from HF_DIR --checkpoint DIR\n"
         "       caf-gwtf --help | --version\n"
         "\n"
         "caf-gwtf trains one LLM on many volunteer hosts without a coordinator (GWTF).\n"
         "\n"
         "  --config FILE   cluster.yaml of this process (configs/local.yaml: embedded cluster)\n"
         "  --set KEY=VALUE override one key of FILE (e.g. hosts[0].stage=2; VALUE is YAML);\n"
         "                  FILE's values may also use ${ENV} and ${ENV:-default}\n"
         "  --check         validate FILE and print it resolved, defaults included\n"
         "                  FILE with one host: node mode, this process is that host and\n"
         "                  trains with its peers over TCP; with several: embedded cluster\n"
         "  --join          node mode: enter a running cluster (download the stage state)\n"
         "  --resume        continue from the checkpoints under node.data_dir: embedded and\n"
         "                  launch from the newest iteration every stage has; nodes agree on\n"
         "                  it among themselves; --resume-at N from iteration N's\n"
         "                  (docs/checkpoints.md)\n"
         "  --until N       stop after N iterations applied (the learning-rate schedule stays\n"
         "                  training.iterations'): train in slices, resume with --resume\n"
         "  launch          run each host of a multi-host FILE as its own process on\n"
         "                  127.0.0.1 (node mode), faults as real signals; host configs and\n"
         "                  logs in DIR (default launch-logs/)\n"
         "  reference       train the unpartitioned model of FILE in this process: the\n"
         "                  oracle of distributed runs (prints loss and tokens/s)\n"
         "  compare         train FILE once per router (gwtf, swarm; atom: every host a whole-\n"
         "                  model peer, training.mode atom) and seed in the real trainer (embedded,\n"
         "                  or one process per host with --launch; seeds: training.seed, +1, ..):\n"
         "                  prints a table per router, writes compare.csv, plots and every run's\n"
         "                  log and loss series to DIR (default compare-results/<FILE's name>)\n"
         "  sim             simulate training under churn in virtual time (configs/scenarios/):\n"
         "                  prints a comparison table, writes CSV, JSON and SVG plots to DIR\n"
         "                  (default sim-results/<scenario>-seed<N>); --router all (default)\n"
         "                  runs gwtf, swarm, swarm-restart, centralized and atom (whole-model\n"
         "                  peers, docs/atom.md) on one churn trace;\n"
         "                  --from-config simulates a cluster config (its hosts, emulated\n"
         "                  network, compute_scale x this machine's measured compute, or\n"
         "                  --compute-ms HOLDER,RELAY per microbatch, faults)\n"
         "  shell           inspect a running host through its node.inspect address: status,\n"
         "                  hosts, flows, graph, links, stage, microbatches, actors (docs/shell.md);\n"
         "                  interactive with line editing, or one COMMAND with -c; --cert, --key\n"
         "                  and --ca: mutual TLS with a host that runs node.tls\n"
         "  export          write the model at the newest checkpoint cut under DIR (hosts'\n"
         "                  node.data_dir side by side) as model.safetensors + config.json in\n"
         "                  the Hugging Face layout (GPT-2 or LLaMA names; docs/checkpoints.md)\n"
         "  eval            print the loss of that model on a deterministic held-out batch\n"
         "  import          a Hugging Face GPT-2 / LLaMA directory as checkpoints of iteration 0\n"
         "                  under DIR, one per declared host: train from it with --resume\n"
         "  --help          this text\n"
         "  --version       versions of caf-gwtf and its libraries, and the BLAS in use\n"
         "\n"
         "Exit codes: 0 success, 1 failure (e.g. invalid config), 2 usage error.\n"
         "Config reference: docs/config.md\n";
}

namespace {

// `--name VALUE` or `--name=VALUE` at args[i]; advances i past a separate value.
std::variant<std::string, cli_error> option_value(const std::vector<std::string>& args, std::size_t& i,
                                                  const std::string& name, const char* what) {
  const std::string& a = args[i];
  std::string v;
  if (a == name) {
    if (i + 1 >= args.size() || args[i + 1].empty())
      return cli_error{name + " needs " + what};
    v = args[++i];
  } else {
    v = a.substr(name.size() + 1);
  }
  if (v.empty())
    return cli_error{name + " needs " + what};
  return v;
}

// --set KEY=VALUE (or --set=KEY=VALUE) at args[i] into out.sets; `example` is a key=value of
// the mode's config for the messages.
std::optional<cli_error> take_set(const std::vector<std::string>& args, std::size_t& i, const std::string& example,
                                  cli_options& out) {
  auto what = "KEY=VALUE (e.g. --set " + example + ")";
  auto v = option_value(args, i, "--set", what.c_str());
  if (auto* e = std::get_if<cli_error>(&v))
    return *e;
  auto& kv = std::get<std::string>(v);
  if (kv.find('=') == std::string::npos || kv.front() == '=')
    return cli_error{"--set: expected KEY=VALUE (e.g. " + example + "), got '" + kv + "'"};
  out.sets.push_back(kv);
  return std::nullopt;
}

bool is_option(const std::string& a, const std::string& name) {
  return a == name || a.rfind(name + "=", 0) == 0;
}

std::vector<std::string> all_routers() {
  return {"gwtf", "swarm", "swarm-restart", "centralized", "atom"};
}

// export / eval: --config FILE --checkpoint DIR [--iteration N] (--out DIR | --batch-out FILE)
std::variant<cli_options, cli_error> parse_checkpoint_tool(const std::vector<std::string>& args) {
  cli_options out;
  bool is_export = args[0] == "export";
  bool is_import = args[0] == "import";
  out.action = is_export ? cli_action::export_hf : is_import ? cli_action::import_hf : cli_action::eval;
  for (std::size_t i = 1; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--help" || a == "-h") {
      out.action = cli_action::help;
      return out;
    }
    auto name = a.substr(0, a.find('='));
    std::string* into = nullptr;
    const char* what = "";
    if (is_option(a, "--config")) {
      into = &out.config;
      what = "a file name";
    } else if (is_option(a, "--checkpoint")) {
      into = &out.checkpoint;
      what = "a directory (hosts' node.data_dir side by side)";
    } else if (is_option(a, "--out") && is_export) {
      into = &out.out;
      what = "a directory";
    } else if (is_option(a, "--batch-out") && !is_export && !is_import) {
      into = &out.batch_out;
      what = "a file name";
    } else if (is_option(a, "--from") && is_import) {
      into = &out.from;
      what = "a Hugging Face model directory";
    } else if (is_option(a, "--iteration") && !is_import) {
      auto v = option_value(args, i, "--iteration", "an iteration number");
      if (auto* e = std::get_if<cli_error>(&v))
        return *e;
      auto& text = std::get<std::string>(v);
      if (text.size() > 18 || text.find_first_not_of("0123456789") != std::string::npos)
        return cli_error{"--iteration: expected an iteration number, got '" + text + "'"};
      out.iteration = std::stoull(text);
      continue;
    } else {
      return cli_error{"unknown " + args[0] + " option '" + a + "' (see --help)"};
    }
    if (!into->empty())
      return cli_error{name + " given twice"};
    auto v = option_value(args, i, name, what);
    if (auto* e = std::get_if<cli_error>(&v))
      return *e;
    *into = std::get<std::string>(v);
  }
  if (out.config.empty())
    return cli_error{args[0] + " needs --config FILE (the cluster's config: the model and the checkpoints' hash)"};
  if (out.checkpoint.empty())
    return cli_error{args[0] + " needs --checkpoint DIR"};
  if (is_export && out.out.empty())
    return cli_error{"export needs --out DIR"};
  if (is_import && out.from.empty())
    return cli_error{"import needs --from DIR (a Hugging Face model directory)"};
  return out;
}

std::variant<cli_options, cli_error> parse_sim(const std::vector<std::string>& args) {
  cli_options out;
  out.action = cli_action::sim;
  bool has_router = false;
  for (std::size_t i = 1; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--help" || a == "-h") {
      out.action = cli_action::help;
      return out;
    }
    auto take = [&](const char* name, const char* what, std::string& into) -> std::optional<cli_error> {
      if (!into.empty() || (std::string{name} == "--router" && has_router))
        return cli_error{std::string{name} + " given twice"};
      auto v = option_value(args, i, name, what);
      if (auto* e = std::get_if<cli_error>(&v))
        return *e;
      into = std::get<std::string>(v);
      return std::nullopt;
    };
    std::optional<cli_error> err;
    if (is_option(a, "--scenario")) {
      err = take("--scenario", "a file name", out.scenario);
    } else if (is_option(a, "--from-config")) {
      err = take("--from-config", "a cluster config file", out.config);
    } else if (is_option(a, "--compute-ms")) {
      if (out.compute_ms)
        return cli_error{"--compute-ms given twice"};
      auto v = option_value(args, i, "--compute-ms", "HOLDER,RELAY milliseconds");
      if (auto* e = std::get_if<cli_error>(&v))
        return *e;
      auto& t = std::get<std::string>(v);
      auto comma = t.find(',');
      double h = 0, r = 0;
      std::size_t used_h = 0, used_r = 0;
      try {
        if (comma != std::string::npos) {
          h = std::stod(t.substr(0, comma), &used_h);
          r = std::stod(t.substr(comma + 1), &used_r);
        }
      } catch (const std::exception&) {
        used_h = 0;
      }
      if (comma == std::string::npos || used_h != comma || used_r != t.size() - comma - 1 || !(h > 0 && h < 1e7)
          || !(r > 0 && r < 1e7))
        return cli_error{"--compute-ms: expected HOLDER,RELAY milliseconds above 0 (e.g. 1.0,21.5), got '" + t + "'"};
      out.compute_ms = std::make_pair(h, r);
    } else if (is_option(a, "--set")) {
      err = take_set(args, i, "faults.crash_rate=0", out);
    } else if (is_option(a, "--out")) {
      err = take("--out", "a directory", out.out);
    } else if (is_option(a, "--router")) {
      std::string r;
      err = take("--router", "gwtf, swarm, swarm-restart, centralized, atom or all", r);
      has_router = true;
      if (!err) {
        if (r == "all")
          out.routers = all_routers();
        else if (r == "gwtf" || r == "swarm" || r == "swarm-restart" || r == "centralized" || r == "atom")
          out.routers = {r};
        else
          err = cli_error{"--router: expected gwtf, swarm, swarm-restart, centralized, atom or all, got '" + r + "'"};
      }
    } else if (is_option(a, "--seed")) {
      if (out.seed)
        return cli_error{"--seed given twice"};
      auto v = option_value(args, i, "--seed", "a number");
      if (auto* e = std::get_if<cli_error>(&v))
        return *e;
      auto& s = std::get<std::string>(v);
      std::uint64_t n = 0;
      bool ok = s.size() <= 20 && s.find_first_not_of("0123456789") == std::string::npos;
      for (char c : s) {
        if (!ok)
          break;
        auto d = static_cast<std::uint64_t>(c - '0');
        ok = n <= (UINT64_MAX - d) / 10;
        n = n * 10 + d;
      }
      if (!ok)
        return cli_error{"--seed: expected a non-negative integer below 2^64, got '" + s + "'"};
      out.seed = n;
    } else if (is_option(a, "--config") || a == "--check") {
      err = cli_error{a.substr(0, a.find('=')) + " is not an option of sim (it takes --scenario FILE or --from-config FILE)"};
    } else if (!a.empty() && a[0] == '-') {
      err = cli_error{"unknown option '" + a + "' of sim (see --help)"};
    } else {
      err = cli_error{"unexpected argument '" + a + "' (see --help)"};
    }
    if (err)
      return *err;
  }
  if (out.scenario.empty() && out.config.empty())
    return cli_error{"sim needs --scenario FILE (see configs/scenarios/) or --from-config FILE (a cluster config)"};
  if (!out.scenario.empty() && !out.config.empty())
    return cli_error{"sim takes --scenario FILE or --from-config FILE, not both"};
  if (out.compute_ms && out.config.empty())
    return cli_error{"--compute-ms is the compute of a cluster config's hosts: sim takes it with --from-config FILE"};
  if (!out.sets.empty() && out.config.empty())
    return cli_error{"--set overrides a cluster config: sim takes it with --from-config FILE"};
  if (out.routers.empty())
    out.routers = all_routers();
  return out;
}

std::variant<cli_options, cli_error> parse_compare(const std::vector<std::string>& args) {
  cli_options out;
  out.action = cli_action::compare;
  bool has_routers = false, has_seeds = false;
  for (std::size_t i = 1; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--help" || a == "-h") {
      out.action = cli_action::help;
      return out;
    }
    auto value = [&](const std::string& name, const char* what) -> std::variant<std::string, cli_error> {
      return option_value(args, i, name, what);
    };
    if (a == "--launch") {
      out.launch_hosts = true;
    } else if (is_option(a, "--config") || is_option(a, "--out")) {
      auto name = a.substr(0, a.find('='));
      auto& into = name == "--config" ? out.config : out.out;
      if (!into.empty())
        return cli_error{name + " given twice"};
      auto v = value(name, name == "--config" ? "a file name" : "a directory");
      if (auto* e = std::get_if<cli_error>(&v))
        return *e;
      into = std::get<std::string>(v);
    } else if (is_option(a, "--set")) {
      if (auto err = take_set(args, i, "training.iterations=20", out))
        return *err;
    } else if (is_option(a, "--routers")) {
      if (has_routers)
        return cli_error{"--routers given twice"};
      has_routers = true;
      auto v = value("--routers", "a comma-separated list of gwtf, swarm and atom");
      if (auto* e = std::get_if<cli_error>(&v))
        return *e;
      std::stringstream list{std::get<std::string>(v)};
      for (std::string r; std::getline(list, r, ',');) {
        if (r != "gwtf" && r != "swarm" && r != "atom")
          return cli_error{"--routers: expected gwtf, swarm or atom, got '" + r
                           + "' (the simulator's other routers: caf-gwtf sim)"};
        if (std::find(out.routers.begin(), out.routers.end(), r) != out.routers.end())
          return cli_error{"--routers: '" + r + "' given twice"};
        out.routers.push_back(r);
      }
      if (out.routers.empty())
        return cli_error{"--routers needs a comma-separated list of gwtf, swarm and atom"};
    } else if (is_option(a, "--seeds")) {
      if (has_seeds)
        return cli_error{"--seeds given twice"};
      has_seeds = true;
      auto v = value("--seeds", "a number of seeds from 1 to 100");
      if (auto* e = std::get_if<cli_error>(&v))
        return *e;
      auto& t = std::get<std::string>(v);
      if (t.size() > 3 || t.find_first_not_of("0123456789") != std::string::npos || std::stoi(t) < 1 || std::stoi(t) > 100)
        return cli_error{"--seeds: expected a number of seeds from 1 to 100, got '" + t + "'"};
      out.seeds = std::stoi(t);
    } else if (!a.empty() && a[0] == '-') {
      return cli_error{"unknown option '" + a + "' of compare (see --help)"};
    } else {
      return cli_error{"unexpected argument '" + a + "' (see --help)"};
    }
  }
  if (out.config.empty())
    return cli_error{"compare needs --config FILE (a cluster config: configs/compare.yaml)"};
  if (out.routers.empty())
    out.routers = {"gwtf", "swarm"};
  return out;
}

std::variant<cli_options, cli_error> parse_shell(const std::vector<std::string>& args) {
  cli_options out;
  out.action = cli_action::shell;
  bool has_timeout = false, has_command = false;
  for (std::size_t i = 1; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--help" || a == "-h") {
      out.action = cli_action::help;
      return out;
    }
    if (a == "--json") {
      out.json = true;
    } else if (a == "-c" || is_option(a, "--command")) {
      if (has_command)
        return cli_error{"-c given twice"};
      auto v = option_value(args, i, a == "-c" ? "-c" : "--command", "a command (e.g. status)");
      if (auto* e = std::get_if<cli_error>(&v))
        return *e;
      out.command = std::get<std::string>(v);
      has_command = true;
    } else if (is_option(a, "--timeout-ms")) {
      if (has_timeout)
        return cli_error{"--timeout-ms given twice"};
      auto v = option_value(args, i, "--timeout-ms", "milliseconds");
      if (auto* e = std::get_if<cli_error>(&v))
        return *e;
      auto& s = std::get<std::string>(v);
      if (s.empty() || s.size() > 7 || s.find_first_not_of("0123456789") != std::string::npos || std::stoi(s) < 1)
        return cli_error{"--timeout-ms: expected 1..9999999 milliseconds, got '" + s + "'"};
      out.timeout_ms = std::stoi(s);
      has_timeout = true;
    } else if (is_option(a, "--cert") || is_option(a, "--key") || is_option(a, "--ca")) {
      auto name = a.substr(0, a.find('='));
      auto& into = name == "--cert" ? out.cert : name == "--key" ? out.key : out.ca;
      if (!into.empty())
        return cli_error{name + " given twice"};
      auto v = option_value(args, i, name, "a PEM file");
      if (auto* e = std::get_if<cli_error>(&v))
        return *e;
      into = std::get<std::string>(v);
    } else if (!a.empty() && a[0] == '-') {
      return cli_error{"unknown option '" + a + "' of shell (see --help)"};
    } else if (out.target.empty()) {
      out.target = a;
    } else {
      return cli_error{"unexpected argument '" + a + "' (shell takes one HOST:PORT)"};
    }
  }
  if (out.target.empty())
    return cli_error{"shell needs HOST:PORT (a host's node.inspect address)"};
  bool any_tls = !out.cert.empty() || !out.key.empty() || !out.ca.empty();
  if (any_tls && (out.cert.empty() || out.key.empty() || out.ca.empty()))
    return cli_error{"shell: --cert, --key and --ca go together (a certificate of the cluster CA, its key, the CA)"};
  return out;
}

} // namespace

std::variant<cli_options, cli_error> parse_cli(const std::vector<std::string>& args) {
  if (!args.empty() && args[0] == "sim")
    return parse_sim(args);
  if (!args.empty() && args[0] == "compare")
    return parse_compare(args);
  if (!args.empty() && args[0] == "shell")
    return parse_shell(args);
  if (!args.empty() && (args[0] == "export" || args[0] == "eval" || args[0] == "import"))
    return parse_checkpoint_tool(args);
  cli_options out;
  bool help = false;
  bool version = false;
  bool check = false;
  bool has_config = false;
  bool reference = false, launch = false;
  std::size_t first = 0;
  if (!args.empty() && (args[0] == "reference" || args[0] == "launch")) {
    reference = args[0] == "reference";
    launch = args[0] == "launch";
    first = 1;
  }
  for (std::size_t i = first; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--help" || a == "-h") {
      help = true;
    } else if (a == "--version") {
      version = true;
    } else if (a == "--check") {
      check = true;
    } else if (a == "--config" || a.rfind("--config=", 0) == 0) {
      if (has_config)
        return cli_error{"--config given twice"};
      if (a == "--config") {
        if (i + 1 >= args.size() || args[i + 1].empty())
          return cli_error{"--config needs a file name"};
        out.config = args[++i];
      } else {
        out.config = a.substr(9);
        if (out.config.empty())
          return cli_error{"--config needs a file name"};
      }
      has_config = true;
    } else if (is_option(a, "--set")) {
      if (auto err = take_set(args, i, "node.advertise=10.0.0.5:4242", out))
        return *err;
    } else if (a == "--join" && !reference && !launch) {
      out.join = true;
    } else if (a == "--resume" && !reference) {
      out.resume = true;
    } else if ((is_option(a, "--resume-at") || is_option(a, "--until")) && !reference) {
      auto name = a.substr(0, a.find('='));
      auto example = "an iteration number (e.g. " + name + " 40)";
      auto v = option_value(args, i, name, example.c_str());
      if (auto* e = std::get_if<cli_error>(&v))
        return *e;
      auto& text = std::get<std::string>(v);
      if (text.size() > 18 || text.find_first_not_of("0123456789") != std::string::npos)
        return cli_error{name + ": expected an iteration number, got '" + text + "'"};
      auto n = std::stoull(text);
      if (name == "--until") {
        if (n == 0)
          return cli_error{"--until: expected at least 1 iteration, got 0"};
        out.until = n;
      } else {
        out.resume = true;
        out.resume_at = n;
      }
    } else if ((is_option(a, "--report") && !reference && !launch) || (is_option(a, "--logs") && launch)) {
      auto name = a.substr(0, a.find('='));
      auto& into = name == "--report" ? out.report : out.logs;
      if (!into.empty())
        return cli_error{name + " given twice"};
      auto v = option_value(args, i, name, name == "--report" ? "HOST:PORT" : "a directory");
      if (auto* e = std::get_if<cli_error>(&v))
        return *e;
      into = std::get<std::string>(v);
    } else if (!a.empty() && a[0] == '-') {
      return cli_error{"unknown option '" + a + "' (see --help)"};
    } else {
      return cli_error{"unexpected argument '" + a + "' (see --help)"};
    }
  }
  if (help) {
    out.action = cli_action::help;
  } else if (version) {
    out.action = cli_action::version;
  } else if (!has_config) {
    return cli_error{args.empty() ? "missing --config FILE (see --help)"
                                  : (check ? "--check needs --config FILE"
                                           : "missing --config FILE (see --help)")};
  } else if ((reference || launch) && check) {
    return cli_error{std::string{"--check is not an option of "} + (reference ? "reference" : "launch")
                     + " (validate with: --config FILE --check)"};
  } else {
    out.action = reference ? cli_action::reference
                 : launch  ? cli_action::launch
                           : (check ? cli_action::check : cli_action::node);
  }
  return out;
}

int run_exit_code(const run_outcome& r, std::ostream& err) {
  if (!r.completed) {
    for (auto& f : r.failures)
      err << "caf-gwtf: " << f << "\n";
    err << "caf-gwtf: training did not complete\n";
    return exit_code::failure;
  }
  if (r.violations.empty() && r.disagreements.empty())
    return exit_code::ok;
  // Trained to the end, but not as the reference trainer would have: not a good run.
  for (auto& v : r.violations)
    err << "caf-gwtf: exactly-once violation: " << v << "\n";
  for (auto& d : r.disagreements)
    err << "caf-gwtf: replica disagreement: " << d << "\n";
  err << "caf-gwtf: training completed, but with " << r.violations.size() << " exactly-once violation(s) and "
      << r.disagreements.size() << " replica disagreement(s) (exit code " << exit_code::check_failed << ")\n";
  return exit_code::check_failed;
}

} // namespace gwtf::app
