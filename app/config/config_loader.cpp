#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>

#include "app/config/cluster_config.hpp"
#include "app/config/derive.hpp"
#include "app/config/yaml_fields.hpp"
#include "model/hash.hpp"
#include "model/partition.hpp"
#include "routing/placement.hpp"

namespace gwtf::app {

namespace fs = std::filesystem;

std::string config_error::to_string() const {
  std::string out = file;
  if (line > 0)
    out += ":" + std::to_string(line) + ":" + std::to_string(column);
  out += ": ";
  if (!key.empty())
    out += key + ": ";
  return out + message;
}

namespace detail {

std::string join_path(const std::string& parent, const std::string& key) {
  return parent.empty() ? key : parent + "." + key;
}

std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j)
    row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

std::string format_double(double v) {
  char buf[64];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, v);
    if (std::strtod(buf, nullptr) == v)
      break;
  }
  std::string s = buf;
  // Keep it a float in YAML's eyes: "3" would read back as an integer scalar.
  if (s.find_first_of(".eEn") == std::string::npos)
    s += ".0";
  return s;
}

void reader::override_source(const std::string& path, std::string source) {
  sources_.emplace_back(path, std::move(source));
}

void reader::error_at(const YAML::Mark& mark, const std::string& key, std::string message) {
  for (auto it = sources_.rbegin(); it != sources_.rend(); ++it) {
    auto& p = it->first;
    bool below = key.size() > p.size() && key.compare(0, p.size(), p) == 0
                 && (key[p.size()] == '.' || key[p.size()] == '[');
    if (key == p || below) {
      errors_.push_back(config_error{it->second, 0, 0, key, std::move(message)});
      return;
    }
  }
  bool known = mark.line >= 0 && !mark.is_null();
  errors_.push_back(config_error{file_, known ? mark.line + 1 : 0, known ? mark.column + 1 : 0,
                                 key, std::move(message)});
}

void reader::error_on(const YAML::Node& node, const std::string& path, std::string message) {
  if (node.IsNull())
    error_for(path, std::move(message));
  else
    error_at(node.Mark(), path, std::move(message));
}

void reader::error_for(const std::string& key, std::string message) {
  // Walk up "hosts[2].stage" -> "hosts[2]" -> "hosts" -> "" until a position is known.
  std::string path = key;
  while (true) {
    auto it = marks_.find(path);
    if (it != marks_.end()) {
      error_at(it->second, key, std::move(message));
      return;
    }
    if (path.empty())
      break;
    auto cut = path.find_last_of(".[");
    path = cut == std::string::npos ? std::string{} : path.substr(0, cut);
  }
  errors_.push_back(config_error{file_, 0, 0, key, std::move(message)});
}

namespace {

std::string describe(const YAML::Node& node) {
  if (node.IsNull())
    return "nothing (null)";
  if (node.IsMap())
    return "a map";
  if (node.IsSequence())
    return "a list";
  if (node.Tag() == "!")
    return "the quoted string \"" + node.Scalar() + "\"";
  return "'" + node.Scalar() + "'";
}

} // namespace

bool reader::scalar_or_error(const YAML::Node& node, const std::string& path, const char* what,
                             bool allow_quoted) {
  if (node.IsScalar() && (allow_quoted || node.Tag() != "!"))
    return true;
  error_on(node, path, std::string{"expected "} + what + ", got " + describe(node));
  return false;
}

bool reader::read_integer(const YAML::Node& node, const std::string& path, long long lo,
                          unsigned long long hi, long long* s, unsigned long long* u) {
  if (!scalar_or_error(node, path, "an integer", false))
    return false;
  const std::string& text = node.Scalar();
  auto out_of_range = [&] {
    error_at(node.Mark(), path, "expected an integer in [" + std::to_string(lo) + ", "
                                  + std::to_string(hi) + "], got '" + text + "'");
    return false;
  };
  const char* first = text.data();
  const char* last = text.data() + text.size();
  if (first != last && *first == '+')
    ++first;
  bool negative = first != last && *first == '-';
  std::from_chars_result r{};
  if (s != nullptr) {
    r = std::from_chars(first, last, *s);
  } else {
    // from_chars rejects a '-' for unsigned; parse the magnitude to tell "-3" from "abc".
    r = std::from_chars(first + (negative ? 1 : 0), last, *u);
  }
  if (first == last || r.ptr != last || (r.ec != std::errc{} && r.ec != std::errc::result_out_of_range)) {
    error_at(node.Mark(), path, "expected an integer, got " + describe(node));
    return false;
  }
  if (r.ec == std::errc::result_out_of_range)
    return out_of_range();
  if (s != nullptr && (*s < lo || (*s > 0 && static_cast<unsigned long long>(*s) > hi)))
    return out_of_range();
  if (u != nullptr && ((negative && *u != 0) || *u > hi))
    return out_of_range();
  return true;
}

void reader::read_double(const YAML::Node& node, const std::string& path, double& out) {
  if (!scalar_or_error(node, path, "a number", false))
    return;
  const std::string& text = node.Scalar();
  errno = 0;
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  bool alpha_only = std::all_of(text.begin(), text.end(),
                                [](unsigned char c) { return std::isalpha(c) || c == '-'; });
  if (text.empty() || end != text.c_str() + text.size() || alpha_only) {
    error_at(node.Mark(), path, "expected a number, got " + describe(node));
    return;
  }
  if (errno == ERANGE || !std::isfinite(v)) {
    error_at(node.Mark(), path, "expected a finite number, got '" + text + "'");
    return;
  }
  out = v;
}

void reader::read_string(const YAML::Node& node, const std::string& path, std::string& out) {
  if (scalar_or_error(node, path, "a string", true))
    out = node.Scalar();
}

void reader::report_unknown(const YAML::Node& key_node, const std::string& path,
                            const std::string& key, const std::vector<std::string>& known) {
  std::string best;
  std::size_t best_distance = 3; // suggest only close matches
  for (auto& k : known) {
    auto d = edit_distance(key, k);
    if (d < best_distance) {
      best_distance = d;
      best = k;
    }
  }
  std::string expected;
  for (auto& k : known)
    expected += (expected.empty() ? "" : ", ") + k;
  std::string msg = "unknown key";
  if (!best.empty())
    msg += " (did you mean '" + best + "'?)";
  msg += "; expected one of: " + expected;
  error_at(key_node.Mark(), join_path(path, key), msg);
}

/// Parses text into a YAML document, or records the parser's error.
std::optional<YAML::Node> parse_yaml(const std::string& text, const std::string& file,
                                     std::vector<config_error>& errors) {
  try {
    return YAML::Load(text);
  } catch (const YAML::ParserException& e) {
    errors.push_back(config_error{file, e.mark.line + 1, e.mark.column + 1, "",
                                  "invalid YAML: " + e.msg});
  } catch (const YAML::Exception& e) {
    errors.push_back(config_error{file, 0, 0, "", std::string{"invalid YAML: "} + e.what()});
  }
  return std::nullopt;
}

std::optional<std::string> slurp(const fs::path& file, std::string& why) {
  std::error_code ec;
  if (!fs::exists(file, ec)) {
    why = "no such file";
    return std::nullopt;
  }
  if (fs::is_directory(file, ec)) {
    why = "is a directory, expected a file";
    return std::nullopt;
  }
  std::ifstream in{file, std::ios::binary};
  if (!in) {
    why = "cannot open for reading";
    return std::nullopt;
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Absolute, so that the printed config means the same from any working directory.
fs::path resolve(const fs::path& base_dir, const std::string& p) {
  fs::path path{p};
  if (path.is_relative())
    path = base_dir / path;
  std::error_code ec;
  auto abs = fs::absolute(path, ec);
  return (ec ? path : abs).lexically_normal();
}

} // namespace detail

namespace {


using detail::parse_yaml;
using detail::reader;
using detail::resolve;
using detail::slurp;

network_result parse_network(const std::string& text, const std::string& file) {
  network_result out;
  auto doc = parse_yaml(text, file, out.errors);
  if (!doc)
    return out;
  if (!doc->IsMap()) {
    out.errors.push_back(config_error{file, 1, 1, "", "expected a network matrix: a map with "
                                                      "name, regions, latency_ms, bandwidth_mbps"});
    return out;
  }
  reader r{file, out.errors};
  routing::network_matrix net;
  r.read(*doc, "", net);
  for (const char* required : {"regions", "latency_ms", "bandwidth_mbps"})
    if (!(*doc)[required])
      r.error_for(required, "missing; a network matrix needs regions, latency_ms and "
                            "bandwidth_mbps");
  if (out.errors.empty())
    net.validate([&](const std::string& k, const std::string& e) { r.error_for(k, "expected " + e); });
  if (out.errors.empty())
    out.network = std::move(net);
  return out;
}

/// Cross-section checks and path resolution; `errors` also receives the network matrix
/// file's own errors (they name that file).
void validate_cluster(cluster_config& cfg, reader& r, const fs::path& base_dir,
                      std::vector<config_error>& errors) {
  auto section = [&r](std::string prefix) {
    return [&r, prefix = std::move(prefix)](const std::string& k, const std::string& e) {
      r.error_for(detail::join_path(prefix, k), "expected " + e);
    };
  };
  cfg.node.validate(section("node"));
  if (cfg.node.tls) // loaded when the node starts (their errors name node.tls.*)
    for (auto* path : {&cfg.node.tls->certificate, &cfg.node.tls->key, &cfg.node.tls->ca, &cfg.node.tls->directory})
      if (!path->empty())
        *path = resolve(base_dir, *path).string();
  cfg.model.validate(section("model"));
  cfg.training.validate(section("training"));
  cfg.routing.validate(section("routing"));
  cfg.faults.validate(section("faults"));
  cfg.compression.validate(section("compression"));
  cfg.placement.validate(section("placement"));

  if (cfg.training.mode == model::training_mode::atom)
    make_atom(cfg); // every host a whole-model peer (docs/atom.md)
  if (cfg.hosts.empty())
    r.error_for("hosts", "expected a non-empty list of the virtual hosts this process runs");
  std::set<std::string> names;
  bool has_data_holder = false;
  for (std::size_t i = 0; i < cfg.hosts.size(); ++i) {
    auto& h = cfg.hosts[i];
    std::string at = "hosts[" + std::to_string(i) + "]";
    h.validate(cfg.model.stages, section(at));
    if (!h.name.empty() && !names.insert(h.name).second)
      r.error_for(at + ".name", "expected a unique host name, got '" + h.name + "' twice");
    if (h.role == actors::host_role::data_holder) {
      has_data_holder = true;
      h.stage = 0; // data holders always run stage 0
    }
  }

  if (has_data_holder) {
    cfg.data.validate(cfg.model.vocab, section("data"));
    if (!cfg.data.path.empty()) {
      auto p = resolve(base_dir, cfg.data.path);
      std::error_code ec;
      if (!fs::is_regular_file(p, ec))
        r.error_for("data.path", "expected an existing corpus file, '" + p.string()
                                   + "' is not one (scripts/install-deps installs the demo corpus)");
      else if (fs::file_size(p, ec) < static_cast<std::uintmax_t>(cfg.model.seq_len + 1) * 2)
        r.error_for("data.path", "expected a corpus of at least 2 sequences (seq_len + 1 "
                                   "tokens each), '" + p.string() + "' is smaller");
      cfg.data.path = p.string();
    }
  }

  if (!cfg.training.loss_out.empty()) {
    auto p = resolve(base_dir, cfg.training.loss_out);
    std::error_code ec;
    if (!p.has_filename() || fs::is_directory(p, ec))
      r.error_for("training.loss_out", "expected a file path for the loss series, got the "
                                         "directory '" + p.string() + "'");
    cfg.training.loss_out = p.string();
  }

  if (cfg.training.checkpoint_every > 0 && cfg.node.data_dir.empty())
    r.error_for("training.checkpoint_every", "expected node.data_dir to be set too (where the checkpoints go), or 0");
  if (!cfg.node.data_dir.empty()) {
    auto p = resolve(base_dir, cfg.node.data_dir);
    std::error_code ec;
    if (fs::exists(p, ec) && !fs::is_directory(p, ec))
      r.error_for("node.data_dir", "expected a directory for checkpoints, '" + p.string() + "' is a file");
    cfg.node.data_dir = p.string();
  }

  for (std::size_t i = 0; i < cfg.faults.script.size(); ++i) {
    auto& ev = cfg.faults.script[i];
    std::string at = "faults.script[" + std::to_string(i) + "]";
    if (!ev.host.empty() && names.count(ev.host) == 0)
      r.error_for(at + ".host", "expected a host declared in hosts, got '" + ev.host + "'");
    if (!ev.peer.empty() && names.count(ev.peer) == 0)
      r.error_for(at + ".peer", "expected a host declared in hosts, got '" + ev.peer + "'");
    if (ev.at_iteration >= cfg.training.iterations)
      r.error_for(at + ".at_iteration", "expected an iteration below training.iterations ("
                                          + std::to_string(cfg.training.iterations) + "), got "
                                          + std::to_string(ev.at_iteration));
  }

  bool node_mode = cfg.hosts.size() == 1;
  { // a microbatch's key keeps 12 bits for its data holder (model::microbatch_id::key())
    std::size_t holders = cfg.training.data_holders.size();
    if (!node_mode)
      holders = static_cast<std::size_t>(std::count_if(cfg.hosts.begin(), cfg.hosts.end(), [](auto& h) {
        return h.role == actors::host_role::data_holder;
      }));
    if (holders > model::max_data_holders)
      r.error_for(node_mode ? "training.data_holders" : "hosts",
                  "expected at most " + std::to_string(model::max_data_holders) + " data holders (a microbatch id keeps "
                    "12 bits for its holder), got " + std::to_string(holders));
    // Exact sums stay inside int64 for at most exact_sum_max_microbatches per iteration.
    auto per_iteration = static_cast<std::uint64_t>(holders)
                         * static_cast<std::uint64_t>(std::max(0, cfg.training.microbatches_per_holder));
    if (cfg.training.reproducible_sums == model::sum_order::exact && per_iteration > model::exact_sum_max_microbatches)
      r.error_for("training.reproducible_sums",
                  "expected key_order or off for more than " + std::to_string(model::exact_sum_max_microbatches)
                    + " microbatches per iteration (exact sums are int64 and hold that many), got exact with "
                    + std::to_string(holders) + " data holders x " + std::to_string(cfg.training.microbatches_per_holder)
                    + " microbatches_per_holder = " + std::to_string(per_iteration));
  }
  if (cfg.training.reproducible_sums == model::sum_order::key_order) {
    // A swapped stage keeps its gradient sums in its file; key_order's copy per microbatch
    // would stay in memory (docs/model.md, "Layer swapping").
    bool budget = cfg.node.memory_budget_mb > 0;
    for (auto& h : cfg.hosts)
      budget = budget || h.memory_budget_mb > 0;
    if (budget)
      r.error_for("training.reproducible_sums",
                  "expected off or exact with a memory budget (hosts[].memory_budget_mb or node.memory_budget_mb): "
                  "key_order keeps a gradient copy per microbatch in memory, which a swapped stage cannot swap");
  }
  if (node_mode) {
    // One host per process: the roster of data holders cannot be read off hosts.
    auto& h = cfg.hosts.front();
    auto& roster = cfg.training.data_holders;
    if (roster.empty())
      r.error_for("training.data_holders",
                  "expected the names of the cluster's data holders, the same list on every host "
                  "(node mode: hosts has one entry, so the roster cannot be read off it)");
    else if (h.role == actors::host_role::data_holder
             && std::find(roster.begin(), roster.end(), h.name) == roster.end())
      r.error_for("training.data_holders", "expected this data holder '" + h.name + "' in the list");
  } else if (!cfg.training.data_holders.empty()) {
    std::vector<std::string> declared;
    for (auto& h : cfg.hosts)
      if (h.role == actors::host_role::data_holder)
        declared.push_back(h.name);
    auto listed = cfg.training.data_holders;
    std::sort(declared.begin(), declared.end());
    std::sort(listed.begin(), listed.end());
    if (declared != listed)
      r.error_for("training.data_holders", "expected exactly the data holders declared in hosts, in any order");
  }

  if (cfg.training.mode == model::training_mode::atom)
    for (auto& [key, expected] : atom_refusals(cfg))
      r.error_for(key, "expected " + expected);

  // Without bootstrap peers nothing else can join: this process must hold a whole pipeline
  // (atom mode: every host holds the whole model).
  if (!node_mode && cfg.node.bootstrap.empty() && !cfg.hosts.empty()
      && cfg.training.mode == model::training_mode::pipeline) {
    std::set<std::string> late; // hosts that only come online through a join event
    for (auto& ev : cfg.faults.script)
      if (ev.action == actors::fault_action::join)
        late.insert(ev.host);
    std::vector<int> live(static_cast<std::size_t>(std::max(cfg.model.stages, 0)), 0);
    int dtfm_placed = 0; // founding relays without a stage: DT-FM gives every relay stage some
    for (auto& h : cfg.hosts) {
      if (h.stage >= 0 && h.stage < cfg.model.stages && late.count(h.name) == 0)
        ++live[static_cast<std::size_t>(h.stage)];
      if (h.role == actors::host_role::relay && h.stage < 0 && late.count(h.name) == 0)
        ++dtfm_placed;
    }
    bool dtfm_covers = cfg.placement.policy == placement_policy::dtfm && dtfm_placed >= cfg.model.stages - 1;
    for (std::size_t s = 0; s < live.size(); ++s)
      if (live[s] == 0 && !(dtfm_covers && s > 0))
        r.error_for("hosts", "expected at least one host of stage " + std::to_string(s)
                               + " online from the start (node.bootstrap is empty, so this "
                                 "process must hold the whole pipeline: a data_holder for "
                                 "stage 0 and a relay for each stage 1.."
                               + std::to_string(cfg.model.stages - 1) + ")");
  }

  // A matrix file named by `key` (the path resolved in place; its errors listed), and a check
  // that every host's region is in a matrix.
  auto load_matrix = [&](const std::string& key, std::string& path) -> std::optional<routing::network_matrix> {
    auto p = resolve(base_dir, path);
    path = p.string();
    auto net = load_network_matrix(p);
    if (!net.errors.empty()) {
      r.error_for(key, "expected a valid network matrix, '" + p.string() + "' has " + std::to_string(net.errors.size())
                         + " error(s), listed below");
      errors.insert(errors.end(), net.errors.begin(), net.errors.end());
      return std::nullopt;
    }
    return std::move(net.network);
  };
  auto check_regions = [&](const routing::network_matrix& net, const std::string& of, const std::string& purpose) {
    std::string regions;
    for (auto& reg : net.regions)
      regions += (regions.empty() ? "" : ", ") + reg;
    for (std::size_t i = 0; i < cfg.hosts.size(); ++i)
      if (!net.region_index(cfg.hosts[i].region))
        r.error_for("hosts[" + std::to_string(i) + "].region", "expected a region of " + of + " '" + net.name + "' ("
                                                                   + regions + ")" + purpose + ", got '"
                                                                   + cfg.hosts[i].region + "'");
  };
  if (cfg.emulation) {
    cfg.emulation->validate(section("emulation"));
    if (!cfg.emulation->network.empty()) {
      cfg.network = load_matrix("emulation.network", cfg.emulation->network);
      if (cfg.network)
        check_regions(*cfg.network, "network", "");
    }
  }

  // DT-FM's cost model reads a region matrix: placement.network, else emulation.network.
  if (!cfg.placement.network.empty())
    cfg.placement_network = load_matrix("placement.network", cfg.placement.network);
  else if (cfg.placement.policy == placement_policy::dtfm && cfg.network)
    cfg.placement_network = cfg.network;
  if (cfg.placement.policy == placement_policy::dtfm) {
    // Each founding relay computes DT-FM's partition of every relay it sees: a declared stage
    // would not be in it.
    for (std::size_t i = 0; i < cfg.hosts.size(); ++i) {
      auto& h = cfg.hosts[i];
      if (h.role == actors::host_role::relay && h.stage >= 1 && !joins_by_script(cfg, h.name))
        r.error_for("hosts[" + std::to_string(i) + "].stage",
                    "no stage with placement.policy dtfm: DT-FM places every relay at cluster start (a relay "
                    "joining later by the fault script may declare one), got " + std::to_string(h.stage));
    }
    if (!cfg.placement_network && cfg.placement.network.empty())
      r.error_for("placement.policy", "dtfm needs every region pair's latency and bandwidth before anything is "
                                      "measured: set placement.network (a matrix as in configs/networks/) or "
                                      "emulation.network");
    if (cfg.placement_network)
      check_regions(*cfg.placement_network, "placement network", " for placement.policy dtfm");
  }
}

// Replaces `${...}` in every value (not key) of the tree; errors name the value's key path.
void expand_tree(YAML::Node node, const std::string& path, const env_lookup& env, reader& r) {
  if (node.IsScalar()) {
    std::string why;
    auto text = node.Scalar();
    if (text.find('$') == std::string::npos)
      return;
    if (auto expanded = expand_env(text, env, why))
      node = *expanded; // keeps the node's position and its quoting (tag)
    else
      r.error_at(node.Mark(), path, why);
  } else if (node.IsSequence()) {
    for (std::size_t i = 0; i < node.size(); ++i)
      expand_tree(node[i], path + "[" + std::to_string(i) + "]", env, r);
  } else if (node.IsMap()) {
    for (auto it = node.begin(); it != node.end(); ++it)
      if (it->first.IsScalar())
        expand_tree(it->second, detail::join_path(path, it->first.Scalar()), env, r);
  }
}

// Applies one `--set KEY=VALUE` to the document: the key path's maps are created as needed,
// list items must exist. Errors go to `errors` under the argument's own name.
void apply_set(YAML::Node& doc, const std::string& arg, reader& r, std::vector<config_error>& errors) {
  std::string label = "--set " + arg;
  auto fail = [&](const std::string& key, std::string message) {
    errors.push_back(config_error{label, 0, 0, key, std::move(message)});
  };
  auto eq = arg.find('=');
  if (eq == std::string::npos || eq == 0) {
    fail("", "expected KEY=VALUE (e.g. node.advertise=10.0.0.5:4242 or hosts[0].stage=2)");
    return;
  }
  auto key = arg.substr(0, eq);
  // Segments: names separated by '.', each with optional [N] indexes.
  struct segment {
    std::string name;
    std::vector<std::size_t> indexes;
  };
  std::vector<segment> segments;
  std::size_t i = 0;
  while (i <= key.size()) {
    segment seg;
    while (i < key.size() && key[i] != '.' && key[i] != '[')
      seg.name += key[i++];
    if (seg.name.empty()) {
      fail(key, "malformed key: an empty name in '" + key + "'");
      return;
    }
    while (i < key.size() && key[i] == '[') {
      auto close = key.find(']', i);
      auto digits = close == std::string::npos ? std::string{} : key.substr(i + 1, close - i - 1);
      if (digits.empty() || digits.size() > 6 || digits.find_first_not_of("0123456789") != std::string::npos) {
        fail(key, "malformed key: expected a list index like [0] in '" + key + "'");
        return;
      }
      seg.indexes.push_back(std::stoul(digits));
      i = close + 1;
    }
    segments.push_back(std::move(seg));
    if (i == key.size())
      break;
    if (key[i] != '.') {
      fail(key, "malformed key: unexpected '" + std::string(1, key[i]) + "' in '" + key + "'");
      return;
    }
    ++i;
  }
  YAML::Node value;
  try {
    value = YAML::Load(arg.substr(eq + 1));
  } catch (const YAML::Exception& e) {
    fail(key, std::string{"the value is not valid YAML: "} + e.what());
    return;
  }
  // Walk with reset(): assigning one YAML::Node to another would overwrite the tree.
  YAML::Node cur;
  cur.reset(doc);
  std::string path;
  for (std::size_t s = 0; s < segments.size(); ++s) {
    auto& seg = segments[s];
    if (!cur.IsMap() && !cur.IsNull()) {
      fail(key, "'" + (path.empty() ? std::string{"the document"} : path) + "' is not a map of keys");
      return;
    }
    path = detail::join_path(path, seg.name);
    bool last = s + 1 == segments.size();
    if (last && seg.indexes.empty()) {
      cur[seg.name] = value;
      break;
    }
    if (!cur[seg.name] || cur[seg.name].IsNull())
      cur[seg.name] = YAML::Node(seg.indexes.empty() ? YAML::NodeType::Map : YAML::NodeType::Sequence);
    YAML::Node next;
    next.reset(cur[seg.name]);
    for (std::size_t k = 0; k < seg.indexes.size(); ++k) {
      auto idx = seg.indexes[k];
      if (!next.IsSequence() || idx >= next.size()) {
        fail(key, "no " + path + "[" + std::to_string(idx) + "]: " + path
                    + (next.IsSequence() ? " has " + std::to_string(next.size()) + " item(s)" : " is not a list"));
        return;
      }
      path += "[" + std::to_string(idx) + "]";
      if (last && k + 1 == seg.indexes.size()) {
        next[idx] = value;
        r.override_source(path, label);
        return;
      }
      YAML::Node item;
      item.reset(next[idx]);
      next.reset(item);
    }
    cur.reset(next);
  }
  r.override_source(path, label);
}

} // namespace

std::optional<std::string> expand_env(const std::string& text, const env_lookup& env, std::string& why) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c != '$' || i + 1 >= text.size() || (text[i + 1] != '{' && text[i + 1] != '$')) {
      out += c;
      continue;
    }
    if (text[i + 1] == '$') { // "$$": a literal '$'
      out += '$';
      ++i;
      continue;
    }
    auto close = text.find('}', i + 2);
    if (close == std::string::npos) {
      why = "unterminated '${' in '" + text + "' (write $$ for a literal $)";
      return std::nullopt;
    }
    auto body = text.substr(i + 2, close - i - 2);
    auto sep = body.find(":-");
    auto name = body.substr(0, sep);
    bool valid = !name.empty() && !std::isdigit(static_cast<unsigned char>(name[0]));
    for (char n : name)
      valid = valid && (std::isalnum(static_cast<unsigned char>(n)) || n == '_');
    if (!valid) {
      why = "'${" + body + "}': expected ${NAME} or ${NAME:-default} with NAME of [A-Za-z0-9_]";
      return std::nullopt;
    }
    auto value = env ? env(name) : std::nullopt;
    if (sep != std::string::npos && (!value || value->empty()))
      value = body.substr(sep + 2);
    if (!value) {
      why = "environment variable " + name + " is not set (write ${" + name + ":-default} for a default)";
      return std::nullopt;
    }
    out += *value;
    i = close;
  }
  return out;
}

namespace {

env_lookup process_environment() {
  return [](const std::string& name) -> std::optional<std::string> {
    if (const char* v = std::getenv(name.c_str()))
      return std::string{v};
    return std::nullopt;
  };
}

} // namespace

load_result parse_cluster_config(const std::string& text, const std::string& file,
                                 const fs::path& base_dir, const config_overrides& extra) {
  load_result out;
  auto doc = parse_yaml(text, file, out.errors);
  if (!doc)
    return out;
  if (doc->IsNull() && !extra.sets.empty())
    *doc = YAML::Node(YAML::NodeType::Map);
  if (!doc->IsMap()) {
    out.errors.push_back(config_error{
      file, doc->IsNull() ? 0 : doc->Mark().line + 1, doc->IsNull() ? 0 : doc->Mark().column + 1,
      "", "expected a map of sections (node, hosts, model, data, training, routing, faults, "
          "emulation), got " + std::string{doc->IsNull() ? "an empty document" : "something else"}});
    return out;
  }
  reader r{file, out.errors};
  expand_tree(*doc, "", extra.env ? extra.env : process_environment(), r);
  for (auto& arg : extra.sets)
    apply_set(*doc, arg, r, out.errors);
  if (!out.errors.empty())
    return out;
  cluster_config cfg;
  r.read(*doc, "", cfg);
  if (!out.errors.empty())
    return out; // type errors first: semantic checks on half-read values only add noise
  validate_cluster(cfg, r, base_dir, out.errors);
  if (out.errors.empty())
    out.config = std::move(cfg);
  return out;
}

load_result load_cluster_config(const fs::path& file, const config_overrides& extra) {
  std::string why;
  auto text = slurp(file, why);
  if (!text) {
    load_result out;
    out.errors.push_back(config_error{file.string(), 0, 0, "", "cannot read config: " + why});
    return out;
  }
  auto base = file.has_parent_path() ? file.parent_path() : fs::path{"."};
  return parse_cluster_config(*text, file.string(), base, extra);
}

network_result load_network_matrix(const fs::path& file) {
  std::string why;
  auto text = slurp(file, why);
  if (!text) {
    network_result out;
    out.errors.push_back(config_error{file.string(), 0, 0, "", "cannot read network matrix: " + why});
    return out;
  }
  return parse_network(*text, file.string());
}

std::string to_yaml(const cluster_config& cfg) {
  YAML::Emitter out;
  auto copy = cfg; // the field lists take non-const references
  detail::printer p{out};
  p.write(copy);
  return std::string{out.c_str()} + "\n";
}

std::vector<std::string> config_key_paths() {
  std::vector<std::string> out;
  cluster_config cfg;
  detail::key_collector c{"", out};
  visit_fields(c, cfg);
  return out;
}

} // namespace gwtf::app
