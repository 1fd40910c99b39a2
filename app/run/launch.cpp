#include "app/run/launch.hpp"

#include <arpa/inet.h>
#include <csignal>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <map>
#include <set>
#include <mutex>
#include <random>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include "app/run/driver.hpp"
#include "app/run/interrupt.hpp"
#include "app/run/spec.hpp"
#include "app/run/resume.hpp"
#include "app/run/summary.hpp"

extern char** environ;

namespace gwtf::app {

namespace {

using namespace gwtf::actors;
namespace fs = std::filesystem;

// A free TCP port on 127.0.0.1 (the OS picks it; the child binds it moments later).
// The kernel's ephemeral port range (outbound connections take ports from it).
std::pair<int, int> ephemeral_range() {
  std::ifstream f{"/proc/sys/net/ipv4/ip_local_port_range"};
  int lo = 0, hi = 0;
  if (f >> lo >> hi && lo > 0 && hi >= lo)
    return {lo, hi};
  return {32768, 60999};
}

// A port on 127.0.0.1 that is free now, outside the ephemeral range, and not handed out
// before by this launcher. A port the kernel picked (bind to port 0) comes from the ephemeral
// range, and an outbound connection of another host could take it before the host it was
// picked for binds it (seen in the k8s test's harness, which picks ports the same way).
std::optional<std::uint16_t> free_port() {
  static std::mutex mutex;
  static std::set<int> taken;
  static std::mt19937 rng{static_cast<std::mt19937::result_type>(::getpid())};
  std::lock_guard<std::mutex> lock{mutex};
  auto [lo, hi] = ephemeral_range();
  std::vector<int> candidates;
  for (int p = 20000; p < 32000; ++p)
    if ((p < lo || p > hi) && taken.count(p) == 0)
      candidates.push_back(p);
  std::shuffle(candidates.begin(), candidates.end(), rng);
  for (auto p : candidates) {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
      return std::nullopt;
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<std::uint16_t>(p));
    bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    ::close(fd);
    if (ok) {
      taken.insert(p);
      return static_cast<std::uint16_t>(p);
    }
  }
  return std::nullopt;
}

struct child {
  pid_t pid = -1;
  actors::supervisor_actor supervisor; // once attached
  actors::net_link_actor link;
  std::vector<std::string> queued_phases; // crashes asked for before it attached
  std::thread reaper;
  bool exited = false; // reaped (guarded by the control's mutex): the pid is no longer ours
};

class process_control : public host_control {
public:
  process_control(const cluster_config& cfg, std::shared_ptr<const cluster_spec> spec, launch_options opts,
                  std::ostream& out)
    : cfg_(cfg), spec_(std::move(spec)), opts_(std::move(opts)), out_(out) {
  }

  ~process_control() override { reap_all(); }

  // Ports, bootstrap lists and per-host config files, before anything starts.
  std::string prepare() {
    std::error_code ec;
    fs::create_directories(opts_.logs, ec);
    if (ec)
      return "cannot create the log directory '" + opts_.logs + "': " + ec.message();
    std::vector<std::string> initial;
    for (auto& h : cfg_.hosts) {
      auto p = free_port();
      if (!p)
        return "no free TCP port on 127.0.0.1";
      address_[h.name] = "127.0.0.1:" + std::to_string(*p);
      bool late = false;
      for (auto& f : cfg_.faults.script)
        late = late || (f.action == fault_action::join && f.host == h.name && f.at_iteration > 0);
      if (!late) {
        initial.push_back(h.name);
        initial_.insert(h.name);
      }
    }
    int founding_relays = 0;
    for (auto& h : cfg_.hosts)
      if (h.role == actors::host_role::relay && initial_.count(h.name) > 0)
        ++founding_relays;
    for (std::size_t i = 0; i < cfg_.hosts.size(); ++i) {
      auto& h = cfg_.hosts[i]; // as declared: a relay without a stage places itself
      cluster_config c = cfg_;
      c.hosts = {h};
      c.node.listen = address_[h.name];
      c.node.advertise.clear();
      c.node.bootstrap.clear();
      // Two other hosts that start with the run (the next ones in config order); a joiner
      // gets only one: the rest it must learn by gossip.
      auto at = std::find(initial.begin(), initial.end(), h.name);
      std::size_t want = at == initial.end() ? 1 : 2;
      std::size_t start = at == initial.end() ? 0 : static_cast<std::size_t>(at - initial.begin()) + 1;
      for (std::size_t k = 0; k < initial.size() && c.node.bootstrap.size() < want; ++k) {
        auto& other = initial[(start + k) % initial.size()];
        if (other != h.name)
          c.node.bootstrap.push_back(address_[other]);
      }
      c.training.data_holders = spec_->holders;
      // The relays that start with the run: a stage-less one places itself once it sees them
      // all (DT-FM then partitions the same relays in every process, however slow they start).
      c.placement.relays = founding_relays;
      c.training.loss_out.clear();
      c.faults.script.clear();
      c.faults.crash_rate = 0; // the launcher injects every fault
      // Many processes share this machine's cores: one worker thread each (more only
      // contend; docs/benchmarks.md).
      c.node.scheduler_threads = 1;
      host_cfg_[h.name] = c;
      if (auto err = write_config(h.name); !err.empty())
        return err;
    }
    return {};
  }

  std::string write_config(const std::string& host) {
    auto file = fs::path(opts_.logs) / (host + ".yaml");
    std::ofstream f{file};
    f << "# written by caf-gwtf launch for host " << host << "\n" << to_yaml(host_cfg_.at(host));
    if (!f)
      return "cannot write " + file.string();
    config_[host] = file.string();
    return {};
  }

  void init(caf::event_based_actor* driver) override {
    {
      std::lock_guard<std::mutex> guard{mtx_};
      driver_ = caf::actor_cast<driver_actor>(driver);
    }
    auto& mm = driver->system().middleman();
    driver->request(mm.actor_handle(), std::chrono::seconds(10), caf::publish_atom::value, std::uint16_t{0},
                    caf::actor_cast<caf::strong_actor_ptr>(driver), std::set<std::string>{}, std::string{"127.0.0.1"},
                    true)
      .then(
        [this, driver](std::uint16_t port) {
          report_to_ = "127.0.0.1:" + std::to_string(port);
          auto pending = std::move(pending_);
          for (auto& [h, joining] : pending)
            start(driver, h, joining);
        },
        [this, driver](caf::error& e) {
          out_ << "# launch: cannot publish the driver: " << driver->system().render(e) << std::endl;
          driver->send(driver, stop_atom::value);
        });
  }

  void start(caf::event_based_actor*, const host_config& h, bool joining) override {
    if (report_to_.empty()) {
      pending_.emplace_back(h, joining);
      return;
    }
    // A host that starts late (it joins during the run) listens on a port picked now: one picked
    // at the start of the run may have become some connection's ephemeral port meanwhile.
    // Nobody bootstraps from it (only hosts that start with the run are bootstrap addresses);
    // its peers learn its address by gossip.
    if (joining && initial_.count(h.name) == 0) {
      auto p = free_port();
      if (!p) {
        out_ << "# launch: cannot start " << h.name << ": no free TCP port on 127.0.0.1" << std::endl;
        return;
      }
      host_cfg_.at(h.name).node.listen = "127.0.0.1:" + std::to_string(*p);
      if (auto err = write_config(h.name); !err.empty()) {
        out_ << "# launch: cannot start " << h.name << ": " << err << std::endl;
        return;
      }
    }
    std::vector<std::string> args = {opts_.executable, "--config", config_.at(h.name), "--report", report_to_};
    if (joining) {
      args.push_back("--join");
    } else if (spec_->resume && spec_->resume_at) { // the cut, the same for every host
      args.push_back("--resume-at");
      args.push_back(std::to_string(*spec_->resume_at));
    }
    if (spec_->until) {
      args.push_back("--until");
      args.push_back(std::to_string(*spec_->until));
    }
    std::vector<std::string> env_store;
    for (char** e = environ; *e; ++e) {
      std::string v = *e;
      if (v.rfind("OPENBLAS_NUM_THREADS=", 0) != 0 && v.rfind("OMP_NUM_THREADS=", 0) != 0)
        env_store.push_back(v);
    }
    // One process per host on a shared machine: one BLAS thread each (docs/benchmarks.md).
    env_store.push_back("OPENBLAS_NUM_THREADS=1");
    env_store.push_back("OMP_NUM_THREADS=1");
    std::vector<char*> argv, envp;
    for (auto& a : args)
      argv.push_back(a.data());
    argv.push_back(nullptr);
    for (auto& e : env_store)
      envp.push_back(e.data());
    envp.push_back(nullptr);
    auto log = (fs::path(opts_.logs) / (h.name + ".log")).string();
    pid_t parent = ::getpid();
    pid_t pid = ::fork();
    if (pid == 0) {
      // Only async-signal-safe calls until exec.
      ::setpgid(0, 0);                     // Ctrl-C reaches the launcher, which stops the hosts
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // and if the launcher dies, so do they
      if (::getppid() != parent)
        ::_exit(127);
      int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      if (fd >= 0) {
        ::dup2(fd, 1);
        ::dup2(fd, 2);
        ::close(fd);
      }
      sigset_t none;
      sigemptyset(&none);
      ::sigprocmask(SIG_SETMASK, &none, nullptr);
      ::execve(argv[0], argv.data(), envp.data());
      ::_exit(127);
    }
    if (pid < 0) {
      out_ << "# launch: cannot start " << h.name << ": fork failed" << std::endl;
      return;
    }
    std::unique_lock<std::mutex> guard{mtx_};
    auto& c = children_[h.name];
    if (c.reaper.joinable()) { // the host ran before: its reaper is done or about to be
      guard.unlock();
      c.reaper.join();
      guard.lock();
    }
    c.pid = pid;
    c.exited = false;
    c.supervisor = actors::supervisor_actor{};
    c.link = actors::net_link_actor{};
    auto name = h.name;
    auto driver = driver_;
    guard.unlock();
    c.reaper = std::thread([pid, name, driver, this] {
      int status = 0;
      while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      bool crashed = !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
      {
        std::lock_guard<std::mutex> guard{mtx_};
        std::string how = WIFSIGNALED(status) ? "signal " + std::to_string(WTERMSIG(status))
                                              : "exit code " + std::to_string(WEXITSTATUS(status));
        exits_.push_back(name + ": " + how);
        children_[name].exited = true;
      }
      exited_cv_.notify_all();
      caf::anon_send(driver, exited_atom::value, name, crashed);
    });
  }

  void crash(caf::event_based_actor* driver, const std::string& host, const std::string& phase) override {
    std::lock_guard<std::mutex> guard{mtx_};
    auto it = children_.find(host);
    if (it == children_.end() || it->second.exited)
      return;
    if (phase == "any") {
      ::kill(it->second.pid, SIGKILL);
    } else if (it->second.supervisor) {
      // The host arms the crash and SIGKILLs itself in its next pass of that kind.
      driver->send(it->second.supervisor, crash_atom::value, phase);
    } else {
      it->second.queued_phases.push_back(phase);
    }
  }

  bool hang(caf::event_based_actor*, const std::string& host) override { return signal(host, SIGSTOP); }

  void resume(caf::event_based_actor*, const std::string& host) override { signal(host, SIGCONT); }

  void leave(caf::event_based_actor*, const std::string& host) override {
    std::lock_guard<std::mutex> guard{mtx_};
    if (auto it = children_.find(host); it != children_.end() && !it->second.exited)
      ::kill(it->second.pid, SIGTERM);
  }

  void slow(caf::event_based_actor* driver, const std::string& host, const std::string& peer,
            double factor) override {
    std::lock_guard<std::mutex> guard{mtx_};
    for (auto& name : {host, peer})
      if (auto it = children_.find(name); it != children_.end() && it->second.link)
        driver->send(it->second.link, slow_atom::value, host, peer, factor);
  }

  std::map<std::string, actors::supervisor_actor> supervisors() override {
    std::lock_guard<std::mutex> guard{mtx_};
    std::map<std::string, actors::supervisor_actor> out;
    for (auto& [name, child] : children_)
      if (child.supervisor && !child.exited)
        out[name] = child.supervisor;
    return out;
  }

  void attached(caf::event_based_actor* driver, const std::string& host, actors::supervisor_actor supervisor,
                actors::net_link_actor link) override {
    std::lock_guard<std::mutex> guard{mtx_};
    auto it = children_.find(host);
    if (it == children_.end())
      return;
    it->second.supervisor = std::move(supervisor);
    it->second.link = std::move(link);
    for (auto& phase : it->second.queued_phases)
      driver->send(it->second.supervisor, crash_atom::value, phase);
    it->second.queued_phases.clear();
  }

  void stop_all(caf::event_based_actor*) override {
    // The run is over: a graceful leave first, then no mercy after 5 s.
    std::unique_lock<std::mutex> guard{mtx_};
    for (auto& [name, c] : children_)
      if (!c.exited) {
        ::kill(c.pid, SIGCONT); // a hung host must run to leave
        ::kill(c.pid, SIGTERM);
      }
    exited_cv_.wait_for(guard, std::chrono::seconds(5), [this] {
      return std::all_of(children_.begin(), children_.end(), [](auto& kv) { return kv.second.exited; });
    });
    guard.unlock();
    reap_all();
  }

  std::vector<std::string> exits() {
    std::lock_guard<std::mutex> guard{mtx_};
    return exits_;
  }

private:
  bool signal(const std::string& host, int sig) {
    std::lock_guard<std::mutex> guard{mtx_};
    auto it = children_.find(host);
    return it != children_.end() && !it->second.exited && ::kill(it->second.pid, sig) == 0;
  }

  void reap_all() {
    {
      std::lock_guard<std::mutex> guard{mtx_};
      for (auto& [name, c] : children_)
        if (!c.exited)
          ::kill(c.pid, SIGKILL);
    }
    for (auto& [name, c] : children_)
      if (c.reaper.joinable())
        c.reaper.join();
  }

  const cluster_config& cfg_;
  std::shared_ptr<const cluster_spec> spec_;
  launch_options opts_;
  std::ostream& out_;
  driver_actor driver_;
  std::string report_to_;
  std::vector<std::pair<host_config, bool>> pending_;
  std::map<std::string, std::string> address_, config_;
  std::map<std::string, cluster_config> host_cfg_; // each host's own config, as written to its file
  std::set<std::string> initial_;                  // hosts that start with the run: bootstrap addresses
  std::map<std::string, child> children_;
  std::mutex mtx_;
  std::condition_variable exited_cv_;
  std::vector<std::string> exits_;
};

} // namespace

namespace {

// One run of the processes of `cfg` with the driver; every process is gone on return.
embedded_result launch_once(const cluster_config& cfg, std::shared_ptr<const cluster_spec> spec,
                            const launch_options& opts, std::ostream& out, run_interrupts& current,
                            std::vector<std::string>& exits) {
  embedded_result result;
  process_control control{cfg, spec, opts, out};
  if (auto err = control.prepare(); !err.empty()) {
    result.failures.push_back(err);
    return result;
  }
  out << "launch: " << cfg.hosts.size() << " hosts as processes on 127.0.0.1; configs and logs in " << opts.logs
      << std::endl;
  result = run_driver(cfg, spec, control, true, out, opts.timeout_s, &current);
  for (auto& e : control.exits())
    exits.push_back(e);
  return result;
}

} // namespace

embedded_result run_launch(const cluster_config& cfg, const launch_options& opts, std::ostream& out) {
  embedded_result result;
  if (cfg.hosts.size() < 2) {
    result.failures.push_back("launch needs a config with several hosts (configs/local.yaml); run one host "
                              "with caf-gwtf --config FILE");
    return result;
  }
  auto mutable_spec = make_spec(cfg);
  if (auto err = prepare_resume(*mutable_spec, opts.resume, out); !err.empty()) {
    result.failures.push_back(err);
    return result;
  }
  std::shared_ptr<const cluster_spec> spec = mutable_spec;
  // Ctrl-C or SIGTERM ends the run: the hosts leave, then the summary is printed.
  run_interrupts current{out};
  std::vector<std::string> exits;
  result = launch_once(cfg, spec, opts, out, current, exits);
  // A whole relay stage lost with checkpoints on: restored as in the embedded cluster, each
  // round with fresh processes (logs in DIR/restore-N).
  cluster_config now = cfg;
  result = restore_lost_stages(std::move(result), now, opts.resume.until, out,
                               [&](const cluster_config& c, std::shared_ptr<const cluster_spec> resumed,
                                   int round) -> std::optional<embedded_result> {
                                 if (current.interrupted())
                                   return std::nullopt;
                                 auto next = opts;
                                 next.logs = (std::filesystem::path(opts.logs) / ("restore-" + std::to_string(round))).string();
                                 return launch_once(c, resumed, next, out, current, exits);
                               });
  print_summary(now, result, out);
  if (current.interrupted())
    result.failures.push_back(current.what());
  for (auto& e : exits)
    out << "# exited: " << e << "\n";
  return result;
}

} // namespace gwtf::app
