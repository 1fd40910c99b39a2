// The embedded local cluster: every virtual host of the config as actors of this process,
// over one emulated link layer. The driver (driver.cpp) does the rest.
#include "app/run/embedded.hpp"

#include <map>

#include <caf/all.hpp>
#include <nlohmann/json.hpp>

#include "actors/net/link_layer.hpp"
#include "actors/inspect/inspect_server.hpp"
#include "actors/errors.hpp"
#include "actors/inspect/inspect_view.hpp"
#include "actors/net/tls_session.hpp"
#include "app/run/interrupt.hpp"

#include "app/run/driver.hpp"
#include "model/torch_runtime.hpp"
#include "app/run/spec.hpp"
#include "app/run/resume.hpp"
#include "app/run/summary.hpp"

namespace gwtf::app {

namespace {

using namespace gwtf::actors;

// The embedded cluster's shell (docs/shell.md): one inspect server for the process, whose
// queries this actor hands to the host they are for (actors::route_front): the first data
// holder, or the one `use HOST` names. Every host is in this process: no relaying needed.
struct front_state {
  std::map<std::string, supervisor_actor> hosts; // running: name -> supervisor
  std::string attached;
  bool control = false;
  link_actor link;
  int timeout_ms = 1000;
};

caf::behavior inspect_front(caf::stateful_actor<front_state>* self, std::string attached, bool control,
                            link_actor link, int timeout_ms) {
  auto& st = self->state;
  st.attached = std::move(attached);
  st.control = control;
  st.link = std::move(link);
  st.timeout_ms = timeout_ms;
  return {
    [self](register_atom, const std::string& host, supervisor_actor supervisor) {
      self->state.hosts[host] = std::move(supervisor);
    },
    [self](peer_down_atom, const std::string& host) { self->state.hosts.erase(host); },
    [self](inspect_atom, const std::string& query) -> caf::result<std::string> {
      auto& st = self->state;
      std::vector<std::string> live;
      for (auto& [name, sup] : st.hosts)
        live.push_back(name);
      auto routed = route_front(query, st.attached, live, st.control);
      if (auto* e = std::get_if<std::string>(&routed))
        return make_error(ec::bad_query, *e);
      auto r = std::get<front_route>(routed);
      auto sup = st.hosts.at(r.host);
      auto done = [&](const std::string& what) {
        return nlohmann::ordered_json{{"host", r.host}, {"done", what}}.dump();
      };
      if (r.query == "crash") { // that host alone: the process holds the others
        self->send(sup, crash_atom::value, std::string{"any"});
        st.hosts.erase(r.host); // gone for the next query now, not when the driver sees it down
        return done("crashed (its actors killed, as the crash fault does)");
      }
      if (r.query.rfind("slow-link", 0) == 0) { // the shared emulated link layer
        auto req = parse_slow_link(r.query);
        if (auto* e = std::get_if<std::string>(&req))
          return make_error(ec::bad_query, *e);
        auto& sl = std::get<slow_link_request>(req);
        if (st.hosts.count(sl.peer) == 0)
          return make_error(ec::bad_query, "slow-link: no running host named '" + sl.peer + "' (see: hosts)");
        self->send(st.link, slow_atom::value, r.host, sl.peer, sl.factor);
        return done("the emulated link " + r.host + " <-> " + sl.peer + " is now " + std::to_string(sl.factor)
                    + "x slower than the network file says");
      }
      auto promise = self->make_response_promise<std::string>();
      auto timeout = std::chrono::milliseconds(st.timeout_ms + extra_answer_ms(r.query));
      self->request(sup, timeout, inspect_atom::value, r.query)
        .then([promise](std::string& body) mutable { promise.deliver(std::move(body)); },
              [promise, host = r.host](caf::error& e) mutable {
                if (e == caf::sec::request_receiver_down) // it stopped between routing and answering
                  promise.deliver(make_error(ec::bad_query, "no running host named '" + host
                                                              + "' in this embedded cluster (it stopped)"));
                else
                  promise.deliver(std::move(e));
              });
      return promise;
    },
  };
}

class actor_control : public host_control {
public:
  actor_control(const cluster_config& cfg, std::shared_ptr<const cluster_spec> spec, std::ostream& out)
    : cfg_(cfg), spec_(std::move(spec)), out_(out) {
  }

  void init(caf::event_based_actor* driver) override {
    link_ = spawn_link_layer(driver->system(), *cfg_.network, cfg_.hosts, spec_->time_scale);
    driver->link_to(link_);
    serve_shell(driver);
  }

  void start(caf::event_based_actor* driver, const host_config& h, bool joining) override {
    auto a = spawn_host(driver->system(), spec_, h, link_, caf::actor_cast<reporter_actor>(driver), joining);
    driver->monitor(a);
    hosts_[h.name] = a;
    if (front_)
      driver->send(front_, register_atom::value, h.name, a);
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
    for (auto& a : {server_, front_})
      if (a)
        driver->send_exit(a, caf::exit_reason::kill);
    driver->unlink_from(link_);
    driver->send_exit(link_, caf::exit_reason::kill);
    // The link runs on a thread of its own, which the actor system's end waits for until
    // nothing holds the link: this control outlives the system.
    link_ = link_actor{};
  }

  std::map<std::string, supervisor_actor> supervisors() override { return hosts_; }

  std::optional<std::pair<std::string, bool>> on_down(const caf::down_msg& m) override {
    for (auto it = hosts_.begin(); it != hosts_.end(); ++it)
      if (it->second.address() == m.source) {
        auto name = it->first;
        hosts_.erase(it);
        if (front_)
          caf::anon_send(front_, peer_down_atom::value, name);
        return std::make_pair(name, m.reason == caf::exit_reason::kill);
      }
    return std::nullopt;
  }

private:
  // node.inspect: one shell for the whole embedded cluster, attached to the first data holder.
  void serve_shell(caf::event_based_actor* driver) {
    auto at = cfg_.node.inspect.empty() ? std::nullopt : parse_endpoint(cfg_.node.inspect);
    if (!at)
      return;
    std::string attached;
    for (auto& h : cfg_.hosts)
      if (attached.empty() && h.role == host_role::data_holder)
        attached = h.name;
    auto timeout_ms = answer_budget_ms(cfg_.faults);
    front_ = driver->system().spawn(inspect_front, attached, cfg_.node.inspect_control, link_, timeout_ms);
    inspect_server_options so;
    so.host = at->host;
    so.port = at->port;
    so.supervisor = front_;
    so.host_name = "embedded";
    so.reporter = caf::actor_cast<failure_sink_actor>(driver);
    so.timeout_ms = timeout_ms * 2; // the front asks a host within one
    so.control = true;               // the front decides, per host (route_front)
    if (cfg_.node.tls) {
      std::string why;
      // The shell's server ends TLS with the first host's certificate (node.tls.directory: its file).
      auto mine = cfg_.node.tls->for_host(cfg_.hosts.front().name);
      tls_files files{mine.certificate, mine.key, mine.ca, mine.passphrase};
      so.tls = tls_context::make(files, tls_side::server, why);
      if (!so.tls) {
        out_ << "# node.inspect: no shell: " << why << std::endl;
        return;
      }
    }
    server_ = spawn_inspect_server(driver->system(), so);
    auto& out = out_;
    auto host = at->host;
    driver->request(server_, std::chrono::seconds(10), caf::get_atom::value)
      .then([&out, host, attached](std::uint16_t port) {
              out << "inspect: caf-gwtf shell " << host << ":" << port << " (the embedded cluster: " << attached
                  << " answers, use HOST for the others)" << std::endl;
            },
            [&out](caf::error& e) { out << "# node.inspect: cannot listen: " << to_string(e) << std::endl; });
  }

  const cluster_config& cfg_;
  std::shared_ptr<const cluster_spec> spec_;
  std::ostream& out_;
  link_actor link_;
  caf::actor front_, server_;
  std::map<std::string, supervisor_actor> hosts_; // the hosts' supervisors (crash_atom, stop_atom: checked)
};

} // namespace

embedded_result run_embedded(const cluster_config& cfg, std::ostream& out, double timeout_s,
                             const run_bounds& resume) {
  embedded_result result;
  if (!cfg.network) {
    result.failures.push_back("the embedded cluster needs emulation.network");
    return result;
  }
  if (auto why = runtime_refusal(cfg); !why.empty()) {
    result.failures.push_back(why);
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
  // Ctrl-C or SIGTERM ends the run with its summary.
  run_interrupts interrupts{out};
  {
    actor_control control{cfg, spec, out};
    result = run_driver(cfg, spec, control, false, out, timeout_s, &interrupts);
  }
  cluster_config current = cfg;
  result = restore_lost_stages(std::move(result), current, resume.until, out,
                               [&](const cluster_config& c, std::shared_ptr<const cluster_spec> resumed,
                                   int) -> std::optional<embedded_result> {
                                 if (interrupts.interrupted())
                                   return std::nullopt;
                                 double left = timeout_s - std::chrono::duration<double>(
                                                             std::chrono::steady_clock::now() - started).count();
                                 actor_control next{c, resumed, out};
                                 return run_driver(c, resumed, next, false, out, std::max(1.0, left), &interrupts);
                               });
  print_summary(current, result, out);
  if (interrupts.interrupted())
    result.failures.push_back(interrupts.what());
  return result;
}

} // namespace gwtf::app
