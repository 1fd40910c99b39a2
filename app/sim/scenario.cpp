#include "app/sim/scenario.hpp"

#include "app/config/yaml_fields.hpp"
#include "sim/scenario.hpp"

namespace gwtf::app {

namespace fs = std::filesystem;

scenario_result parse_scenario(const std::string& text, const std::string& file, const fs::path& base_dir,
                               std::optional<std::uint64_t> seed) {
  scenario_result out;
  auto doc = detail::parse_yaml(text, file, out.errors);
  if (!doc)
    return out;
  if (!doc->IsMap()) {
    out.errors.push_back(config_error{file, 0, 0, "", "expected a scenario: a map with name, network, "
                                                      "model, hosts, churn (docs/simulator.md)"});
    return out;
  }
  detail::reader r{file, out.errors};
  sim_scenario_config cfg;
  r.read(*doc, "", cfg);
  for (const char* required : {"network", "hosts"})
    if (!(*doc)[required])
      r.error_for(required, "missing; a scenario needs a network and hosts");
  if (!out.errors.empty())
    return out;
  if (seed)
    cfg.seed = *seed;
  auto section = [&r](std::string prefix) {
    return [&r, prefix = std::move(prefix)](const std::string& k, const std::string& e) {
      r.error_for(detail::join_path(prefix, k), "expected " + e);
    };
  };
  if (cfg.name.empty())
    cfg.name = fs::path{file}.stem().string();
  check_int(section(""), "iterations", cfg.iterations, 1, 1000000, "iterations");
  check_int(section(""), "microbatches_per_holder", cfg.microbatches_per_holder, 1, 1000000,
            "microbatches per data holder and iteration");
  cfg.model.validate(section("model"));
  cfg.churn.validate(section("churn"));
  cfg.compression.validate(section("compression"));
  cfg.training.atom.validate(section("training.atom"));
  check_int(section("routing"), "gwtf_view", cfg.routing.gwtf_view, 0, 1000000, "peers per neighbouring stage (0: all)");
  cfg.routing.gwtf.validate(section("routing.gwtf"));
  cfg.routing.swarm.validate(section("routing.swarm"));
  for (std::size_t i = 0; i < cfg.hosts.size(); ++i)
    cfg.hosts[i].validate(section("hosts[" + std::to_string(i) + "]"));
  for (std::size_t i = 0; i < cfg.churn.script.size(); ++i)
    cfg.churn.script[i].validate(section("churn.script[" + std::to_string(i) + "]"));
  if (!out.errors.empty())
    return out;

  auto net_path = detail::resolve(base_dir, cfg.network);
  auto net = load_network_matrix(net_path);
  if (!net.errors.empty()) {
    r.error_for("network", "expected a valid network matrix, '" + net_path.string() + "' has "
                             + std::to_string(net.errors.size()) + " error(s), listed below");
    out.errors.insert(out.errors.end(), net.errors.begin(), net.errors.end());
    return out;
  }
  cfg.network = net_path.string();

  auto derived = sim::derive_scenario(cfg, std::move(*net.network),
                                      [&r](const std::string& key, const std::string& message) { r.error_for(key, message); });
  if (!out.errors.empty())
    return out;
  out.scenario = loaded_scenario{std::move(cfg), std::move(derived.sim), std::move(derived.dtfm)};
  return out;
}

scenario_result load_scenario(const fs::path& file, std::optional<std::uint64_t> seed) {
  std::string why;
  auto text = detail::slurp(file, why);
  if (!text) {
    scenario_result out;
    out.errors.push_back(config_error{file.string(), 0, 0, "", "cannot read scenario: " + why});
    return out;
  }
  auto base = file.has_parent_path() ? file.parent_path() : fs::path{"."};
  return parse_scenario(*text, file.string(), base, seed);
}

std::vector<std::string> scenario_key_paths() {
  std::vector<std::string> out;
  sim_scenario_config cfg;
  detail::key_collector c{"", out};
  visit_fields(c, cfg);
  return out;
}

} // namespace gwtf::app
