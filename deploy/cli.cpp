#include "deploy/cli.hpp"

namespace gwtf::deploy {

std::string usage_text() {
  return "usage: caf-gwtf --config FILE [--check]\n"
         "       caf-gwtf reference --config FILE\n"
         "       caf-gwtf --help | --version\n"
         "\n"
         "caf-gwtf trains one LLM on many volunteer hosts without a coordinator (GWTF).\n"
         "\n"
         "  --config FILE   cluster.yaml of this process (configs/local.yaml: embedded cluster)\n"
         "  --check         validate FILE and print it resolved, defaults included\n"
         "  reference       train the unpartitioned model of FILE in this process: the\n"
         "                  oracle of distributed runs (prints loss and tokens/s)\n"
         "  --help          this text\n"
         "  --version       versions of caf-gwtf and its libraries, and the BLAS in use\n"
         "\n"
         "Exit codes: 0 success, 1 failure (e.g. invalid config), 2 usage error.\n"
         "Config reference: docs/config.md\n";
}

std::variant<cli_options, cli_error> parse_cli(const std::vector<std::string>& args) {
  cli_options out;
  bool help = false;
  bool version = false;
  bool check = false;
  bool has_config = false;
  bool reference = false;
  std::size_t first = 0;
  if (!args.empty() && args[0] == "reference") {
    reference = true;
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
  } else if (reference && check) {
    return cli_error{"--check is not an option of reference (validate with: --config FILE --check)"};
  } else {
    out.action = reference ? cli_action::reference : (check ? cli_action::check : cli_action::node);
  }
  return out;
}

} // namespace gwtf::deploy
