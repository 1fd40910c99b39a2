#include "deploy/node.hpp"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <cstdio>
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

#include "actors/errors.hpp"
#include "actors/freeze_watch.hpp"
#include "actors/interfaces.hpp"
#include "actors/system_setup.hpp"
#include "deploy/cli.hpp"
#include "deploy/driver.hpp"

namespace gwtf::deploy {

namespace {

using namespace gwtf::actors;
using clock = std::chrono::steady_clock;

struct reporter_state {
  std::ostream* out = nullptr;
  std::string me;
  std::uint64_t last_iteration = 0;
  caf::actor upstream; // the launcher's driver, if any
  std::string upstream_address;
  bool reconnecting = false;
  std::vector<std::function<void(const caf::actor&)>> buffered; // events while reconnecting
  std::deque<std::function<void(const caf::actor&)>> recent;  // idempotent reports, sent again after a reconnect
  caf::actor supervisor, link;
  std::promise<int>* exit_code = nullptr;
  restore_order* restore = nullptr; // where to start again after a restore of a lost stage
  bool finishing = false, finished = false, restoring = false;
  clock::time_point start = clock::now();
  int linger_ms = 1000;
};

using reporter_ptr = caf::stateful_actor<reporter_state>*;

// One log line: seconds since start, then the event.
std::ostream& line(reporter_ptr self) {
  auto& st = self->state;
  return *st.out << "[" << std::fixed << std::setprecision(3)
                 << std::chrono::duration<double>(clock::now() - st.start).count() << "] ";
}

// Keeps the last reports the launcher can take twice, to send again after a reconnect.
void remember(reporter_ptr self, std::function<void(const caf::actor&)> f) {
  auto& recent = self->state.recent;
  recent.push_back(std::move(f));
  if (recent.size() > 64)
    recent.pop_front();
}

void finish(reporter_ptr self, int code) {
  auto& st = self->state;
  if (st.finished)
    return;
  st.finished = true;
  st.out->flush();
  st.exit_code->set_value(code);
  self->quit();
}

// The node's reporter: logs what its host reports, forwards it to the launcher when there is
// one, watches the host's supervisor, and ends the process with it.
caf::behavior node_reporter(reporter_ptr self, std::ostream* out, std::string me, std::uint64_t last_iteration,
                            caf::actor upstream, std::string upstream_address, std::promise<int>* exit_code,
                            int linger_ms, restore_order* restore) {
  auto& st = self->state;
  st.out = out;
  st.me = std::move(me);
  st.last_iteration = last_iteration;
  st.upstream = std::move(upstream);
  st.upstream_address = std::move(upstream_address);
  st.exit_code = exit_code;
  st.linger_ms = linger_ms;
  st.restore = restore;
  self->set_down_handler([self](caf::down_msg& m) {
    auto& st = self->state;
    if (m.source == st.upstream.address()) {
      // The connection to the launcher dropped: after a hang (SIGSTOP) its heartbeats timed
      // out. Dial again; if the launcher is really gone, it took this process with it
      // (PR_SET_PDEATHSIG), or the dial fails and the host leaves.
      st.upstream = caf::actor{};
      st.reconnecting = true;
      auto ep = parse_endpoint(st.upstream_address);
      self->request(self->system().middleman().actor_handle(), std::chrono::seconds(5), caf::connect_atom::value,
                    ep->host, ep->port)
        .then(
          [self](const caf::node_id&, caf::strong_actor_ptr& p, const std::set<std::string>&) {
            auto& st = self->state;
            if (!p) {
              st.reconnecting = false;
              st.buffered.clear();
              self->send(self, stop_atom::value);
              return;
            }
            st.upstream = caf::actor_cast<caf::actor>(p);
            self->monitor(st.upstream);
            line(self) << "reconnected to the launcher" << std::endl;
            self->send(st.upstream, register_atom::value, st.me, st.supervisor, st.link);
            st.reconnecting = false;
            // Reports sent just before the connection dropped may be lost: the recent
            // idempotent ones (share keys, averaging contributors) go again.
            for (auto& f : st.recent)
              f(st.upstream);
            for (auto& f : st.buffered)
              f(st.upstream);
            st.buffered.clear();
          },
          [self](caf::error& e) {
            self->state.reconnecting = false;
            self->state.buffered.clear();
            line(self) << "launcher gone (" << self->system().render(e) << "): leaving" << std::endl;
            self->send(self, stop_atom::value);
          });
      return;
    }
    if (m.source != st.supervisor.address())
      return;
    if (m.reason.category() == actors::error_category
        && m.reason.code() == static_cast<std::uint8_t>(actors::ec::frozen)) {
      line(self) << "declared dead while frozen: starting again as a new process that joins" << std::endl;
      self->send_exit(st.link, caf::exit_reason::user_shutdown);
      finish(self, exit_code::rejoin);
      return;
    }
    if (m.reason == caf::exit_reason::kill) {
      // An injected crash: die as a crashed host does, without a word.
      line(self) << "crash injected: SIGKILL" << std::endl;
      st.out->flush();
      ::kill(::getpid(), SIGKILL);
      return;
    }
    line(self) << "host stopped (" << self->system().render(m.reason) << ")" << std::endl;
    // The last frames (shares, LEAVE) are still in the middleman's send buffers: an exit
    // now would drop them and the peers would wait for a share that never comes. Linger.
    self->delayed_send(self, std::chrono::milliseconds(st.linger_ms / 2), done_atom::value);
  });
  if (st.upstream)
    self->monitor(st.upstream);
  // Events go to the launcher; while its connection is being dialled again they wait.
  auto up = [self](auto... xs) {
    auto& st = self->state;
    if (st.upstream)
      self->send(st.upstream, xs...);
    else if (st.reconnecting && st.buffered.size() < 100000)
      st.buffered.push_back([self, xs...](const caf::actor& to) { self->send(to, xs...); });
  };
  return {
    [self, up](register_atom, caf::actor supervisor, caf::actor link) {
      auto& st = self->state;
      st.supervisor = supervisor;
      st.link = link;
      self->monitor(supervisor);
      up(register_atom::value, st.me, supervisor, link);
    },
    [self, up](iteration_atom, const std::string& holder, std::uint64_t i, std::uint32_t mbs, double loss_sum,
               std::uint32_t flows) {
      line(self) << "iteration " << i << " done at " << holder << ": " << mbs << " microbatches, loss "
                 << std::setprecision(4) << (mbs > 0 ? loss_sum / mbs : 0) << ", flows " << flows << std::endl;
      up(iteration_atom::value, holder, i, mbs, loss_sum, flows);
    },
    [self, up](share_atom, const std::string& host, std::uint32_t stage, std::uint64_t i,
               const std::vector<std::uint64_t>& keys) {
      line(self) << "shared iteration " << i << " (" << keys.size() << " microbatches counted)" << std::endl;
      remember(self, [self, host, stage, i, keys](const caf::actor& to) {
        self->send(to, share_atom::value, host, stage, i, keys);
      });
      up(share_atom::value, host, stage, i, keys);
    },
    [self, up](averaged_atom, const std::string& host, std::uint32_t stage, std::uint64_t i,
               const std::vector<std::string>& contributors) {
      up(averaged_atom::value, host, stage, i, contributors);
      remember(self, [self, host, stage, i, contributors](const caf::actor& to) {
        self->send(to, averaged_atom::value, host, stage, i, contributors);
      });
      auto& l = line(self) << "averaged iteration " << i << " over the shares of";
      for (auto& c : contributors)
        l << " " << c;
      l << (contributors.empty() ? " nobody (no microbatch at this stage)" : "") << std::endl;
    },
    [self, up](applied_atom, const std::string& host, std::uint32_t stage, std::uint64_t i, std::uint64_t hash) {
      auto& st = self->state;
      up(applied_atom::value, host, stage, i, hash);
      line(self) << "applied iteration " << i << " (stage " << stage << ", weights hash " << std::hex << hash
                 << std::dec << ")" << std::endl;
      if (i >= st.last_iteration && !st.finishing) {
        // Training is over here. Linger so that peers still finishing the last iteration
        // get what they need from us, then leave gracefully.
        st.finishing = true;
        self->delayed_send(self, std::chrono::milliseconds(st.linger_ms), stop_atom::value);
      }
    },
    [up](compute_atom, const std::string& host, std::uint64_t i, double secs, double wasted) {
      up(compute_atom::value, host, i, secs, wasted);
    },
    [self, up](peer_down_atom, const std::string& host, const std::string& peer) {
      line(self) << "peer " << peer << " silent past the connection timeout: declared dead" << std::endl;
      up(peer_down_atom::value, host, peer);
    },
    [self, up](placed_atom, const std::string& host, std::int32_t stage, const std::string& why) {
      line(self) << "placed at stage " << stage << " (" << why << ")" << std::endl;
      up(placed_atom::value, host, stage, why);
    },
    [self, up](joined_atom, const std::string& host, std::uint64_t steps, std::uint64_t bytes) {
      line(self) << "loaded the stage state (" << steps << " steps applied, " << bytes << " bytes)" << std::endl;
      up(joined_atom::value, host, steps, bytes);
    },
    [self, up](checkpoint_atom, const std::string& host, std::uint32_t stage, std::uint64_t i, std::uint64_t bytes,
               double ms, const std::string& path) {
      line(self) << "checkpoint of stage " << stage << " at iteration " << i << " written to " << path << " ("
                 << bytes << " bytes, " << std::fixed << std::setprecision(1) << ms << " ms)" << std::endl;
      up(checkpoint_atom::value, host, stage, i, bytes, ms, path);
    },
    [self, up](loaded_atom, const std::string& host, std::uint32_t stage, std::uint64_t i, std::uint64_t hash,
               const std::string& path) {
      line(self) << "resumed stage " << stage << " at iteration " << i << " from " << path << " (weights hash "
                 << std::hex << hash << std::dec << ")" << std::endl;
      up(loaded_atom::value, host, stage, i, hash, path);
    },
    [self, up](served_atom, const std::string& host, const std::string& peer, std::uint32_t stage, std::uint64_t i,
               std::uint64_t bytes, const std::string& path) {
      line(self) << "sent " << peer << " the checkpoint of stage " << stage << " at iteration " << i << " from "
                 << path << " (" << bytes << " bytes)" << std::endl;
      up(served_atom::value, host, peer, stage, i, bytes, path);
    },
    [self, up](replica_atom, const std::string& host, const std::string& owner, std::uint32_t stage, std::uint64_t i,
               std::uint64_t bytes, const std::string& path) {
      line(self) << "stored " << owner << "'s checkpoint of stage " << stage << " at iteration " << i << " in " << path
                 << " (" << bytes << " bytes)" << std::endl;
      up(replica_atom::value, host, owner, stage, i, bytes, path);
    },
    [self, up](restart_atom, const std::string& host, const std::string& why) {
      line(self) << "local actors restarted (" << why << ")" << std::endl;
      up(restart_atom::value, host, why);
    },
    [self, up](left_atom, const std::string& host, const std::string& why) {
      line(self) << "leaving: " << why << std::endl;
      up(left_atom::value, host, why);
    },
    [self, up](reload_atom, const std::string& host, const std::string& why) {
      line(self) << why << std::endl;
      up(reload_atom::value, host, why);
    },
    [self, up](verdict_atom, const std::string& host, const std::string& what) {
      line(self) << what << std::endl;
      up(verdict_atom::value, host, what);
    },
    [self, up](failure_atom, const std::string& host, const std::string& what) {
      line(self) << "handled: " << what << std::endl;
      up(failure_atom::value, host, what);
    },
    [self](restore_atom, const std::string&, std::uint32_t stage, std::uint64_t i, const std::string& restorer,
           std::int32_t from, const std::string& decided_by, std::int32_t next) {
      auto& st = self->state;
      if (!st.restore || st.restoring || st.finished)
        return;
      st.restoring = true;
      auto& l = line(self);
      if (stage == 0) // a resume order: no stage lost
        l << "the cluster resumes at iteration " << i
          << ", the newest of which every stage has a checkpoint on a live host (decided by " << decided_by << ")";
      else
        l << "every replica of stage " << stage << " is gone: restoring it from the checkpoints of iteration " << i
          << " (decided by " << decided_by << "): " << restorer << " takes stage " << stage
          << (from >= 0 ? " from stage " + std::to_string(from) : std::string{" (it had no stage)"});
      l << "; this host starts again at iteration " << i << (next >= 0 ? " at stage " + std::to_string(next) : std::string{})
        << std::endl;
      *st.restore = restore_order{i, next};
      // The RESTORE frames it forwarded are still in the middleman's send buffers: linger.
      self->delayed_send(self, std::chrono::milliseconds(st.linger_ms / 2), restore_atom::value);
    },
    [self](restore_atom) {
      self->send_exit(self->state.link, caf::exit_reason::user_shutdown);
      finish(self, exit_code::restore);
    },
    [self](done_atom) {
      self->send_exit(self->state.link, caf::exit_reason::user_shutdown);
      finish(self, exit_code::ok);
    },
    [self](stop_atom) {
      // SIGTERM / SIGINT, the end of training, or the launcher's loss: a graceful leave.
      auto& st = self->state;
      if (st.supervisor)
        self->send(st.supervisor, stop_atom::value);
      else
        finish(self, exit_code::ok);
    },
  };
}

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

std::optional<caf::actor> connect_upstream(caf::actor_system& sys, const std::string& address,
                                           std::ostream& err) {
  auto ep = parse_endpoint(address);
  if (!ep || ep->port == 0) {
    err << "caf-gwtf: --report needs HOST:PORT, got '" << address << "'\n";
    return std::nullopt;
  }
  caf::scoped_actor self{sys};
  std::optional<caf::actor> out;
  self->request(sys.middleman().actor_handle(), std::chrono::seconds(10), caf::connect_atom::value, ep->host,
                ep->port)
    .receive(
      [&](const caf::node_id&, caf::strong_actor_ptr& ptr, const std::set<std::string>&) {
        if (ptr)
          out = caf::actor_cast<caf::actor>(ptr);
        else
          err << "caf-gwtf: nothing is published at " << address << "\n";
      },
      [&](caf::error& e) { err << "caf-gwtf: cannot reach the launcher at " << address << ": " << sys.render(e) << "\n"; });
  return out;
}

} // namespace

// Stamps the process's freeze watch every `period` (actors/freeze_watch.hpp) until destroyed.
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
  // The TLS identity is loaded before anything starts: a bad file is one clear line here, not
  // an exception inside CAF's multiplexer at the first dial.
  std::shared_ptr<const tls_context> tls, tls_client;
  if (cfg.node.tls) {
    std::string why;
    tls_files files{cfg.node.tls->certificate, cfg.node.tls->key, cfg.node.tls->ca, cfg.node.tls->passphrase};
    tls = tls_context::make(files, tls_side::server, why);
    if (tls)
      tls_client = tls_context::make(files, tls_side::client, why);
    if (!tls || !tls_client) {
      std::cerr << "caf-gwtf: " << why << "\n";
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
    caf::actor upstream;
    if (!opts.report.empty()) {
      auto up = connect_upstream(sys, opts.report, std::cerr);
      if (!up)
        return exit_code::failure;
      upstream = *up;
    }
    auto reporter = sys.spawn(node_reporter, &out, host.name,
                              spec->end_iteration() - 1, upstream, opts.report,
                              &exit_promise,
                              std::max(1000, 2 * cfg.faults.heartbeat_interval_ms), restore);
    net_link_options lo;
    lo.self = spec->hosts.front();
    lo.bootstrap = cfg.node.bootstrap;
    lo.cluster = cluster_hash(cfg);
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
    // The middleman listens on loopback only; peers reach it through the guard, which
    // checks every frame header before CAF allocates for it (actors/frame_guard.hpp).
    auto inner = sys.middleman().publish(link, 0, "127.0.0.1", true);
    net_guard_options go;
    go.host = listen->host;
    go.port = listen->port;
    go.inner_port = inner ? *inner : 0;
    // A wire frame plus CAF's message framing (type names, actor ids, stages): 1 MiB slack.
    go.max_payload = static_cast<std::uint64_t>(cfg.node.max_message_bytes) + (1u << 20);
    go.host_name = host.name;
    go.reporter = reporter;
    go.tls = tls;
    go.tls_client = tls_client;
    go.dial_timeout_ms = lo.connect_timeout_ms;
    // Longer than any honest handshake (the heartbeat interval must exceed it too), short
    // enough that idle half-open connections do not pile up.
    go.handshake_timeout_ms = std::max(2000, cfg.faults.connection_timeout_ms);
    auto guard = spawn_net_guard(sys, go);
    caf::expected<std::uint16_t> port = caf::sec::request_timeout;
    if (inner) {
      caf::scoped_actor asker{sys};
      asker->request(guard, std::chrono::seconds(10), caf::get_atom::value)
        .receive([&](std::uint16_t p) { port = p; }, [&](caf::error& e) { port = std::move(e); });
    } else {
      port = inner.error();
    }
    if (!port) {
      std::cerr << "caf-gwtf: node.listen: cannot listen on " << cfg.node.listen << ": " << sys.render(port.error())
                << "\n";
      for (auto& a : {link, reporter, guard})
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
    caf::anon_send(link, start_atom::value, advertise, guard);
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
      so.supervisor = supervisor;
      so.host_name = host.name;
      so.reporter = reporter;
      so.timeout_ms = std::max(1000, 2 * cfg.faults.heartbeat_interval_ms);
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
        caf::anon_send(reporter, stop_atom::value);
      }
    });
    code = exit_future.get();
    char stop = 0;
    [[maybe_unused]] auto n = ::write(shutdown_pipe[1], &stop, 1);
    signal_thread.join();
    caf::anon_send_exit(link, caf::exit_reason::kill);
    caf::anon_send_exit(guard, caf::exit_reason::kill);
    for (auto& a : {inspector, metrics})
      if (a)
        caf::anon_send_exit(a, caf::exit_reason::kill);
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

} // namespace gwtf::deploy
