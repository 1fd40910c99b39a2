// The embedded local cluster: every virtual host of the config as actors of this process,
// over one emulated link layer. The driver (driver.cpp) does the rest.
#include "deploy/embedded.hpp"

#include <map>

#include <caf/all.hpp>

#include "deploy/driver.hpp"
#include "model/torch_runtime.hpp"

namespace gwtf::deploy {

namespace {

using namespace gwtf::actors;

class actor_control : public host_control {
public:
  actor_control(const cluster_config& cfg, std::shared_ptr<const cluster_spec> spec)
    : cfg_(cfg), spec_(std::move(spec)) {
  }

  void init(caf::event_based_actor* driver) override {
    link_ = spawn_link_layer(driver->system(), *cfg_.network, cfg_.hosts, spec_->time_scale);
    driver->link_to(link_);
  }

  void start(caf::event_based_actor* driver, const host_config& h, bool joining) override {
    auto a = spawn_host(driver->system(), spec_, h, link_, caf::actor_cast<caf::actor>(driver), joining);
    driver->monitor(a);
    hosts_[h.name] = a;
  }

  void crash(caf::event_based_actor* driver, const std::string& host, const std::string& phase) override {
    if (auto it = hosts_.find(host); it != hosts_.end())
      driver->send(it->second, crash_atom::value, phase);
  }

  void leave(caf::event_based_actor* driver, const std::string& host) override {
    if (auto it = hosts_.find(host); it != hosts_.end())
      driver->send(it->second, stop_atom::value);
  }

  void slow(caf::event_based_actor* driver, const std::string& host, const std::string& peer,
            double factor) override {
    driver->send(link_, slow_atom::value, host, peer, factor);
  }

  void stop_all(caf::event_based_actor* driver) override {
    for (auto& [name, a] : hosts_)
      driver->send_exit(a, caf::exit_reason::kill);
    driver->unlink_from(link_);
    driver->send_exit(link_, caf::exit_reason::kill);
  }

  std::map<std::string, caf::actor> supervisors() override { return hosts_; }

  std::optional<std::pair<std::string, bool>> on_down(const caf::down_msg& m) override {
    for (auto it = hosts_.begin(); it != hosts_.end(); ++it)
      if (it->second.address() == m.source) {
        auto name = it->first;
        hosts_.erase(it);
        return std::make_pair(name, m.reason == caf::exit_reason::kill);
      }
    return std::nullopt;
  }

private:
  const cluster_config& cfg_;
  std::shared_ptr<const cluster_spec> spec_;
  caf::actor link_;
  std::map<std::string, caf::actor> hosts_;
};

} // namespace

embedded_result run_embedded(const cluster_config& cfg, std::ostream& out, double timeout_s,
                             const run_bounds& resume) {
  embedded_result result;
  if (!cfg.network) {
    result.failures.push_back("the embedded cluster needs emulation.network");
    return result;
  }
  if (cfg.routing.router != routing::router_kind::gwtf) {
    result.failures.push_back("routing.router: the embedded cluster routes with gwtf only; swarm is not "
                              "supported here (docs/runtime.md)");
    return result;
  }
  for (std::size_t i = 0; i < cfg.faults.script.size(); ++i)
    if (cfg.faults.script[i].action == fault_action::hang) {
      result.failures.push_back("faults.script[" + std::to_string(i) + "]: hang stops a process (SIGSTOP); the "
                                "embedded cluster runs every host in one: use caf-gwtf launch");
      return result;
    }
  // The actor threads are the parallelism: OpenBLAS threads of its own per matmul
  // oversubscribed them (2x slower on 2 cores, docs/benchmarks.md). Restored on return.
  struct blas_guard {
    int before = model::set_blas_threads(1);
    ~blas_guard() {
      if (before > 0)
        model::set_blas_threads(before);
    }
  } blas;
  auto mutable_spec = make_spec(cfg);
  if (auto err = prepare_resume(*mutable_spec, resume, out); !err.empty()) {
    embedded_result failed;
    failed.failures.push_back(err);
    return failed;
  }
  std::shared_ptr<const cluster_spec> spec = mutable_spec;
  auto started = std::chrono::steady_clock::now();
  {
    actor_control control{cfg, spec};
    result = run_driver(cfg, spec, control, false, out, timeout_s);
  }
  cluster_config current = cfg;
  result = restore_lost_stages(std::move(result), current, resume.until, out,
                               [&](const cluster_config& c, std::shared_ptr<const cluster_spec> resumed, int) {
                                 double left = timeout_s - std::chrono::duration<double>(
                                                             std::chrono::steady_clock::now() - started).count();
                                 actor_control next{c, resumed};
                                 return std::optional{run_driver(c, resumed, next, false, out, std::max(1.0, left))};
                               });
  print_summary(current, result, out);
  return result;
}

} // namespace gwtf::deploy
