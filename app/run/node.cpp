#include "app/run/node.hpp"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <fcntl.h>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <future>
#include <iomanip>
#include <pthread.h>
#include <thread>
#include <sys/socket.h>
#include <netdb.h>
#include <unistd.h>

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include "actors/net/net_link.hpp"
#include "actors/net/peer_transport.hpp"
#include "actors/inspect/inspect_server.hpp"
#include "actors/errors.hpp"
#include "actors/core/freeze_watch.hpp"
#include "actors/interfaces.hpp"
#include "actors/system_setup.hpp"
#include "app/cli.hpp"
#include "app/config/derive.hpp"
#include "app/run/node_reporter.hpp"
#include "app/run/spec.hpp"

namespace gwtf::app {

namespace {

using namespace gwtf::actors;
using clock = std::chrono::steady_clock;

// SIGTERM and SIGINT become a byte on this pipe: the signal thread reads it and starts the
// graceful leave. A handler rather than sigwait: libraries start threads before main (OpenBLAS
// its pool) with the signals unblocked, and a signal the kernel gave one of them killed the
// process. A handler runs in whichever thread takes the signal.
int shutdown_pipe[2] = {-1, -1};

extern "C" void on_shutdown_signal(int sig) {
  int saved = errno;
  char c = static_cast<char>(sig);
  [[maybe_unused]] auto n = ::write(shutdown_pipe[1], &c, 1);
  errno = saved;
}

// Installs the handlers and unblocks the signals in this thread and the threads it starts
// (`launch` starts its children with them blocked). False with `why` when it cannot.
bool install_shutdown_handlers(std::string& why) {
  if (shutdown_pipe[0] < 0 && ::pipe2(shutdown_pipe, O_CLOEXEC) != 0) {
    why = std::string{"cannot create the shutdown pipe: "} + std::strerror(errno);
    return false;
  }
  struct sigaction sa {};
  sa.sa_handler = on_shutdown_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigset_t set;
  sigemptyset(&set);
  for (int sig : {SIGTERM, SIGINT}) {
    if (::sigaction(sig, &sa, nullptr) != 0) {
      why = std::string{"cannot handle signal "} + std::to_string(sig) + ": " + std::strerror(errno);
      return false;
    }
    sigaddset(&set, sig);
  }
  pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
  return true;
}

// Whether `address` (HOST:PORT, a fixed port) can be listened on now: empty, or why not. The
// metrics and inspect servers start after the host joined its cluster; a port that is taken
// must stop the host before it joins, not leave it running without probes.
std::string listen_problem(const std::string& address) {
  auto ep = parse_endpoint(address);
  if (!ep)
    return "not an address";
  if (ep->port == 0)
    return {};
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  auto port = std::to_string(ep->port);
  if (int rc = ::getaddrinfo(ep->host.c_str(), port.c_str(), &hints, &found); rc != 0)
    return std::string{"cannot resolve "} + ep->host + ": " + ::gai_strerror(rc);
  std::string why = "no address to bind";
  for (auto* a = found; a != nullptr; a = a->ai_next) {
    int fd = ::socket(a->ai_family, a->ai_socktype, a->ai_protocol);
    if (fd < 0) {
      why = std::strerror(errno);
      continue;
    }
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    bool ok = ::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, 1) == 0;
    if (!ok)
      why = std::strerror(errno);
    ::close(fd);
    if (ok) {
      why.clear();
      break;
    }
  }
  ::freeaddrinfo(found);
  return why;
}

std::optional<launcher_actor> connect_upstream(caf::actor_system& sys, const std::string& address,
                                           std::ostream& err) {
  auto ep = parse_endpoint(address);
  if (!ep || ep->port == 0) {
    err << "caf-gwtf: --report needs HOST:PORT, got '" << address << "'\n";
    return std::nullopt;
  }
  caf::scoped_actor self{sys};
  std::optional<launcher_actor> out;
  self->request(sys.middleman().actor_handle(), std::chrono::seconds(10), caf::connect_atom::value, ep->host,
                ep->port)
    .receive(
      [&](const caf::node_id&, caf::strong_actor_ptr& ptr, const std::set<std::string>&) {
        if (ptr)
          out = caf::actor_cast<launcher_actor>(ptr);
        else
          err << "caf-gwtf: nothing is published at " << address << "\n";
      },
      [&](caf::error& e) { err << "caf-gwtf: cannot reach the launcher at " << address << ": " << sys.render(e) << "\n"; });
  return out;
}

} // namespace

// Stamps the process's freeze watch every `period` (actors/core/freeze_watch.hpp) until destroyed.
class watchdog {
public:
  watchdog(std::shared_ptr<actors::freeze_watch> watch, std::chrono::milliseconds period)
    : thread_([this, watch, period] {
        std::unique_lock<std::mutex> lock{mutex_};
        while (!wake_.wait_for(lock, period, [this] { return stop_; }))
          watch->stamp(actors::steady_ms());
      }) {}
  watchdog(const watchdog&) = delete;
  watchdog& operator=(const watchdog&) = delete;
  ~watchdog() {
    {
      std::lock_guard<std::mutex> lock{mutex_};
      stop_ = true;
    }
    wake_.notify_one();
    thread_.join();
  }

private:
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread thread_; // last: starts once the members above exist
};

int run_node(const cluster_config& cfg, const node_options& opts, std::ostream& out, restore_order* restore) {
  const auto& host = cfg.hosts.front();
  auto listen = parse_endpoint(cfg.node.listen);
  if (!listen) {
    std::cerr << "caf-gwtf: node.listen: not an address: " << cfg.node.listen << "\n";
    return exit_code::failure;
  }
  bool wildcard = listen->host == "0.0.0.0" || listen->host == "::";
  if (wildcard && cfg.node.advertise.empty()) {
    std::cerr << "caf-gwtf: node.advertise: needed when node.listen binds every interface ("
              << cfg.node.listen << "): peers must be told an address they can dial\n";
    return exit_code::failure;
  }
  for (auto [key, address] : {std::pair{"node.metrics", &cfg.node.metrics}, std::pair{"node.inspect", &cfg.node.inspect}})
    if (!address->empty())
      if (auto why = listen_problem(*address); !why.empty()) {
        std::cerr << "caf-gwtf: " << key << ": cannot listen on " << *address << ": " << why << "\n";
        return exit_code::failure;
      }
  auto spec = make_spec(cfg);
  // make_spec places a stage-less relay from the declared hosts; here only this host is
  // declared: it places itself from its membership view once it has met the cluster.
  spec->hosts.front().stage = cfg.hosts.front().stage;
  // Its budget (node.memory_budget_mb overrides), and what it leaves room for in flight.
  auto own_host = cfg.hosts.front();
  if (cfg.node.memory_budget_mb > 0)
    own_host.memory_budget_mb = cfg.node.memory_budget_mb;
  spec->hosts.front().memory_budget_mb = own_host.memory_budget_mb;
  spec->hosts.front().capacity = budget_capacity(cfg, own_host);
  spec->until = opts.until;
  if (opts.resume && !opts.join) {
    if (cfg.node.data_dir.empty()) {
      std::cerr << "caf-gwtf: --resume: node.data_dir is not set: there are no checkpoints to resume from\n";
      return exit_code::failure;
    }
    // Loaded by the stage when it starts (a host without a usable one downloads the state
    // from a live replica instead, and says so).
    spec->resume = true;
    spec->resume_at = opts.resume_at;
  }
  // A lost stage is restored by the hosts themselves when they can start again and have
  // checkpoints; under launch, the launcher restores it (docs/checkpoints.md).
  spec->self_restore = restore != nullptr && opts.report.empty() && !cfg.node.data_dir.empty()
                       && cfg.training.checkpoint_every > 0;
  spec->compute_detached = true; // a busy host stays alive to its peers (docs/runtime.md)
  // The TLS identity is loaded before anything starts: a bad file is one clear line here, not
  // an exception inside CAF's multiplexer at the first dial.
  std::shared_ptr<const tls_context> tls, tls_client;
  if (cfg.node.tls) {
    std::string why;
    auto mine = cfg.node.tls->for_host(host.name);
    tls_files files{mine.certificate, mine.key, mine.ca, mine.passphrase};
    tls = tls_context::make(files, tls_side::server, why);
    if (tls)
      tls_client = tls_context::make(files, tls_side::client, why);
    if (!tls || !tls_client) {
      std::cerr << "caf-gwtf: " << why << "\n";
      return exit_code::failure;
    }
    // Peers bind a connection only to a name its certificate carries: a certificate that
    // does not name this host would be refused by every peer, one handshake at a time.
    if (!tls->own().names(host.name)) {
      std::cerr << "caf-gwtf: node.tls.certificate ('" << mine.certificate << "') names " << tls->own().describe()
                << ", not this host '" << host.name << "': peers would refuse it (issue one with scripts/make-certs DIR --hosts "
                << host.name << ")\n";
      return exit_code::failure;
    }
  }
  std::string signal_error;
  if (!install_shutdown_handlers(signal_error)) {
    std::cerr << "caf-gwtf: " << signal_error << "\n";
    return exit_code::failure;
  }
  actors::system_config sc{cfg.node, cfg.faults, true};
  std::promise<int> exit_promise;
  auto exit_future = exit_promise.get_future();
  int code = exit_code::failure;
  {
    caf::actor_system sys{sc};
    { // the handles below go before the system awaits its actors: an actor may end only then
      launcher_actor upstream;
      if (!opts.report.empty()) {
        auto up = connect_upstream(sys, opts.report, std::cerr);
        if (!up)
          return exit_code::failure;
        upstream = *up;
      }
      auto reporter = spawn_node_reporter(sys, &out, host.name,
                                spec->end_iteration() - 1, upstream, opts.report,
                                &exit_promise,
                                std::max(1000, 2 * cfg.faults.heartbeat_interval_ms), restore);
      net_link_options lo;
      lo.self = spec->hosts.front();
      lo.bootstrap = cfg.node.bootstrap;
      lo.cluster = cluster_hash(cfg);
      lo.certified = tls != nullptr;
      lo.incarnation = static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count());
      if (cfg.network) {
        lo.network = cfg.network;
        lo.time_scale = spec->time_scale;
      }
      lo.max_message_bytes = cfg.node.max_message_bytes;
      lo.connect_timeout_ms = std::max(1000, cfg.faults.connection_timeout_ms);
      lo.gossip_interval_ms = std::max(200, cfg.faults.heartbeat_interval_ms * 2);
      lo.reporter = reporter;
      auto link = spawn_net_link(sys, lo);
      // Every peer connection is the transport's: one hop from the socket through TLS and the
      // frame reader, which checks each header before it allocates (actors/net/peer_framing.hpp).
      peer_transport_options po;
      po.host = listen->host;
      po.port = listen->port;
      po.max_frame = static_cast<std::uint64_t>(cfg.node.max_message_bytes);
      po.max_partial_bytes = static_cast<std::uint64_t>(cfg.node.max_partial_bytes);
      po.limits.max_connections = static_cast<std::size_t>(cfg.node.max_connections);
      po.limits.max_per_address = static_cast<std::size_t>(cfg.node.max_connections_per_address);
      po.limits.idle_timeout = std::chrono::milliseconds(cfg.node.idle_timeout_ms);
      po.host_name = host.name;
      po.reporter = reporter;
      po.tls = tls;
      po.tls_client = tls_client;
      po.dial_timeout_ms = lo.connect_timeout_ms;
      // Longer than any honest handshake (the heartbeat interval must exceed it too), short
      // enough that idle half-open connections do not pile up.
      po.handshake_timeout_ms = std::max(2000, cfg.faults.connection_timeout_ms);
      po.link = caf::actor_cast<caf::actor>(link);
      auto transport = spawn_peer_transport(sys, po);
      caf::expected<std::uint16_t> port = caf::sec::request_timeout;
      {
        caf::scoped_actor asker{sys};
        asker->request(transport, std::chrono::seconds(10), caf::get_atom::value)
          .receive([&](std::uint16_t p) { port = p; }, [&](caf::error& e) { port = std::move(e); });
      }
      if (!port) {
        std::cerr << "caf-gwtf: node.listen: cannot listen on " << cfg.node.listen << ": " << sys.render(port.error())
                  << "\n";
        for (auto& a : {caf::actor_cast<caf::actor>(link), caf::actor_cast<caf::actor>(reporter), transport})
          caf::anon_send_exit(a, caf::exit_reason::kill);
        return exit_code::failure;
      }
      std::string advertise;
      if (cfg.node.advertise.empty()) {
        advertise = (listen->host.find(':') != std::string::npos ? "[" + listen->host + "]" : listen->host) + ":"
                    + std::to_string(*port);
      } else {
        auto adv = *parse_endpoint(cfg.node.advertise);
        advertise = cfg.node.advertise.substr(0, cfg.node.advertise.rfind(':') + 1)
                    + std::to_string(adv.port == 0 ? *port : adv.port);
      }
      spec->advertise = advertise;
      caf::anon_send(link, start_atom::value, advertise, transport);
      out << "caf-gwtf node " << host.name << " (" << (host.role == host_role::data_holder ? "data holder" : "relay")
          << ", " << (spec->hosts.front().stage < 0 ? std::string{"stage to be placed"}
                                                     : "stage " + std::to_string(spec->hosts.front().stage))
          << ") listening on " << listen->host << ":" << *port
          << ", advertised as " << advertise << (tls ? ", mutual TLS" : ", plain TCP") << ", cluster " << std::hex << lo.cluster << std::dec << ", bootstrap "
          << cfg.node.bootstrap.size() << " peer(s)" << (opts.join ? ", joining" : "") << std::endl;
      // A process frozen past the connection timeout (SIGSTOP) has been declared dead: from the
      // moment it resumes, none of its actors may send or act on a frame (docs/runtime.md).
      auto watch = std::make_shared<actors::freeze_watch>(cfg.faults.connection_timeout_ms, actors::steady_ms());
      watchdog stamper{watch, std::chrono::milliseconds(std::clamp(cfg.faults.heartbeat_interval_ms / 5, 5, 100))};
      auto supervisor = spawn_host(sys, spec, spec->hosts.front(), link, reporter, opts.join, watch);
      caf::anon_send(reporter, register_atom::value, supervisor, link);
      // The inspection shell's server (docs/shell.md; node.inspect, loopback by default) and,
      // when node.metrics is set, Prometheus metrics, /healthz and /readyz (docs/metrics.md).
      auto serve = [&](const std::string& at_text, const char* key,
                       caf::actor (*spawn)(caf::actor_system&, inspect_server_options),
                       const std::function<std::string(const std::string&, std::uint16_t)>& says) {
        caf::actor server;
        auto at = at_text.empty() ? std::nullopt : parse_endpoint(at_text);
        if (!at)
          return server;
        inspect_server_options so;
        so.host = at->host;
        so.port = at->port;
        so.supervisor = caf::actor_cast<caf::actor>(supervisor);
        so.host_name = host.name;
        so.reporter = reporter;
        so.timeout_ms = answer_budget_ms(cfg.faults);
        so.control = cfg.node.inspect_control;
        if (std::string{key} == "node.inspect") { // metrics stay plain HTTP: probes and Prometheus
          so.tls = tls;
          so.handshake_timeout_ms = std::max(2000, cfg.faults.connection_timeout_ms);
        }
        server = spawn(sys, so);
        caf::scoped_actor asker{sys};
        asker->request(server, std::chrono::seconds(10), caf::get_atom::value)
          .receive([&](std::uint16_t p) { out << says(at->host, p) << std::endl; },
                   [&](caf::error& e) {
                     out << key << ": " << at_text << ": cannot listen (" << sys.render(e) << ")" << std::endl;
                   });
        return server;
      };
      auto inspector = serve(cfg.node.inspect, "node.inspect", spawn_inspect_server,
                             [&tls](const std::string& h, std::uint16_t p) {
                               return "inspect: caf-gwtf shell " + h + ":" + std::to_string(p)
                                    + (tls ? " --cert CERT --key KEY --ca CA (mutual TLS)" : "");
                             });
      auto metrics = serve(cfg.node.metrics, "node.metrics", spawn_metrics_server,
                           [](const std::string& h, std::uint16_t p) {
                             return "metrics: http://" + h + ":" + std::to_string(p) + "/metrics";
                           });
      // Shutdown signals become a graceful leave; a zero byte only ends this thread.
      std::thread signal_thread([reporter] {
        for (;;) {
          char c = 0;
          auto n = ::read(shutdown_pipe[0], &c, 1);
          if (n < 0 && errno == EINTR)
            continue;
          if (n <= 0 || c == 0)
            return;
          caf::anon_send(reporter, stop_atom::value, std::string{c == SIGINT ? "SIGINT" : "SIGTERM"});
        }
      });
      code = exit_future.get();
      char stop = 0;
      [[maybe_unused]] auto n = ::write(shutdown_pipe[1], &stop, 1);
      signal_thread.join();
      caf::anon_send_exit(link, caf::exit_reason::kill);
      caf::anon_send_exit(transport, caf::exit_reason::kill);
      for (auto& a : {inspector, metrics})
        if (a)
          caf::anon_send_exit(a, caf::exit_reason::kill);
    }
    // Every actor has ended once this returns. CAF 0.17's actor_system destructor may still
    // block for good joining the thread of a detached actor that has ended (CAF issue #1196,
    // fixed in 0.18; seen here as a joiner that outlived the launcher's 5 s grace, once in a
    // few runs): nothing is left to do or say then, so a process that is not gone 2 s later
    // exits with its code. Not when it is to start again (restore, rejoin): main does that
    // after this returns.
    sys.await_all_actors_done();
    out.flush();
    std::cout.flush();
    std::cerr.flush();
    if (code != exit_code::restore && code != exit_code::rejoin)
      std::thread([code] {
        std::this_thread::sleep_for(std::chrono::seconds(2));
        std::fputs("caf-gwtf: every actor ended but CAF's shutdown did not within 2 s (CAF issue #1196): exiting\n",
                   stderr);
        std::_Exit(code);
      }).detach();
  }
  return code;
}

int restart_self(const std::vector<std::string>& args, const std::string& why) {
  std::error_code ec;
  auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) {
    std::cerr << "caf-gwtf: cannot start again " << why << ": " << ec.message() << "\n";
    return exit_code::failure;
  }
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  // Nothing of this process but stdin/stdout/stderr survives: its sockets are closed by
  // now (the actor system is gone), and any descriptor left over closes on exec.
  for (auto& entry : std::filesystem::directory_iterator("/proc/self/fd", ec)) {
    int fd = std::atoi(entry.path().filename().c_str());
    if (fd > 2)
      ::fcntl(fd, F_SETFD, FD_CLOEXEC);
  }
  std::vector<std::string> store;
  store.push_back(exe.string());
  store.insert(store.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : store)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  ::execv(store.front().c_str(), argv.data());
  std::cerr << "caf-gwtf: cannot start again " << why << ": execv " << store.front() << " failed\n";
  return exit_code::failure;
}

int restart_as_joiner(const std::vector<std::string>& args) {
  std::vector<std::string> next = args;
  if (std::find(next.begin(), next.end(), "--join") == next.end())
    next.push_back("--join");
  return restart_self(next, "as a joiner");
}

} // namespace gwtf::app
