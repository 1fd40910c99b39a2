// The node's reporter: logs what its host reports, forwards it to the launcher when there is
// one (buffering across reconnects), watches the host's supervisor, and ends the process.
#include "app/run/node_reporter.hpp"

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

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include "actors/errors.hpp"
#include "actors/interfaces.hpp"
#include "app/cli.hpp"
#include "app/run/launcher_protocol.hpp"
#include "common/wall_clock.hpp"

namespace gwtf::app {

namespace {

using namespace gwtf::actors;

struct reporter_state {
  std::ostream* out = nullptr;
  std::string me;
  std::uint64_t last_iteration = 0;
  launcher_actor upstream; // the launcher's driver, if any
  std::string upstream_address;
  bool reconnecting = false;
  std::vector<std::function<void(const launcher_actor&)>> buffered; // events while reconnecting
  std::deque<std::function<void(const launcher_actor&)>> recent;  // idempotent reports, sent again after a reconnect
  supervisor_actor supervisor;
  net_link_actor link;
  std::promise<int>* exit_code = nullptr;
  restore_order* restore = nullptr; // where to start again after a restore of a lost stage
  bool finishing = false, finished = false, restoring = false;
  int linger_ms = 1000;
};

using reporter_ptr = caf::stateful_actor<reporter_state>*;

// One log line: the UTC wall clock (common/wall_clock.hpp), then the event.
std::ostream& line(reporter_ptr self) {
  return *self->state.out << "[" << utc_stamp() << "] ";
}

// Keeps the last reports the launcher can take twice, to send again after a reconnect.
void remember(reporter_ptr self, std::function<void(const launcher_actor&)> f) {
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

// The launcher could not be dialled again: the host leaves, after a linger. A process that
// was frozen past the connection timeout (SIGSTOP) finds its dial failing at once when it
// resumes, and its membership's next tick restarts it as a new replica (docs/runtime.md):
// leaving at once raced that restart and won it (a CI run of the hang test).
void launcher_lost(reporter_ptr self, const std::string& why) {
  auto& st = self->state;
  st.reconnecting = false;
  st.buffered.clear();
  line(self) << "launcher gone (" << why << "): leaving in " << st.linger_ms << " ms" << std::endl;
  self->delayed_send(self, std::chrono::milliseconds(st.linger_ms), stop_atom::value);
}

// The node's reporter: logs what its host reports, forwards it to the launcher when there is
// one, watches the host's supervisor, and ends the process with it.
caf::behavior node_reporter(reporter_ptr self, std::ostream* out, std::string me, std::uint64_t last_iteration,
                            launcher_actor upstream, std::string upstream_address, std::promise<int>* exit_code,
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
      st.upstream = launcher_actor{};
      st.reconnecting = true;
      auto ep = parse_endpoint(st.upstream_address);
      self->request(self->system().middleman().actor_handle(), std::chrono::seconds(5), caf::connect_atom::value,
                    ep->host, ep->port)
        .then(
          [self](const caf::node_id&, caf::strong_actor_ptr& p, const std::set<std::string>&) {
            auto& st = self->state;
            if (!p) {
              launcher_lost(self, "no launcher at its address");
              return;
            }
            st.upstream = caf::actor_cast<launcher_actor>(p);
            self->monitor(st.upstream);
            line(self) << "reconnected to the launcher" << std::endl;
            self->send(st.upstream, register_atom::value, st.me, caf::actor_cast<caf::actor>(st.supervisor),
                       caf::actor_cast<caf::actor>(st.link));
            st.reconnecting = false;
            // Reports sent just before the connection dropped may be lost: the recent
            // idempotent ones (share keys, averaging contributors) go again.
            for (auto& f : st.recent)
              f(st.upstream);
            for (auto& f : st.buffered)
              f(st.upstream);
            st.buffered.clear();
          },
          [self](caf::error& e) { launcher_lost(self, self->system().render(e)); });
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
    // The last frames (shares, LEAVE) are still in the transport's send buffers: an exit
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
      st.buffered.push_back([self, xs...](const launcher_actor& to) { self->send(to, xs...); });
  };
  return node_reporter_actor::behavior_type{
    [self, up](register_atom, supervisor_actor supervisor, net_link_actor link) {
      auto& st = self->state;
      st.supervisor = supervisor;
      st.link = link;
      self->monitor(supervisor);
      up(register_atom::value, st.me, caf::actor_cast<caf::actor>(supervisor), caf::actor_cast<caf::actor>(link));
    },
    [self, up](iteration_atom, const std::string& holder, std::uint64_t i, std::uint32_t mbs, double loss_sum,
               std::uint32_t flows) {
      line(self) << "iteration " << i << " done at " << holder << ": " << mbs << " microbatches, loss "
                 << std::fixed << std::setprecision(4) << (mbs > 0 ? loss_sum / mbs : 0) << ", flows " << flows << std::endl;
      up(iteration_atom::value, holder, i, mbs, loss_sum, flows);
    },
    [self, up](share_atom, const std::string& host, std::uint32_t stage, std::uint64_t i,
               const std::vector<std::uint64_t>& keys) {
      line(self) << "shared iteration " << i << " (" << keys.size() << " microbatches counted)" << std::endl;
      remember(self, [self, host, stage, i, keys](const launcher_actor& to) {
        self->send(to, share_atom::value, host, stage, i, keys);
      });
      up(share_atom::value, host, stage, i, keys);
    },
    [self, up](averaged_atom, const std::string& host, std::uint32_t stage, std::uint64_t i,
               const std::vector<std::string>& contributors, const std::vector<std::uint64_t>& digests) {
      up(averaged_atom::value, host, stage, i, contributors, digests);
      remember(self, [self, host, stage, i, contributors, digests](const launcher_actor& to) {
        self->send(to, averaged_atom::value, host, stage, i, contributors, digests);
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
      // The RESTORE frames it forwarded are still in the transport's send buffers: linger.
      self->delayed_send(self, std::chrono::milliseconds(st.linger_ms / 2), restore_exit_atom::value);
    },
    [self](restore_exit_atom) {
      self->send_exit(self->state.link, caf::exit_reason::user_shutdown);
      finish(self, exit_code::restore);
    },
    [self](done_atom) {
      self->send_exit(self->state.link, caf::exit_reason::user_shutdown);
      finish(self, exit_code::ok);
    },
    [self](stop_atom, const std::string& signal) {
      line(self) << signal << ": leaving gracefully (the stage's work in progress first)" << std::endl;
      self->send(self, stop_atom::value);
    },
    [self](stop_atom) {
      // SIGTERM / SIGINT, the end of training, or the launcher's loss: a graceful leave.
      auto& st = self->state;
      if (st.supervisor)
        self->send(st.supervisor, stop_atom::value);
      else
        finish(self, exit_code::ok);
    },
  }.unbox();
}

} // namespace

node_reporter_actor spawn_node_reporter(caf::actor_system& sys, std::ostream* out, std::string me,
                                        std::uint64_t last_iteration, launcher_actor upstream,
                                        std::string upstream_address, std::promise<int>* exit_code, int linger_ms,
                                        restore_order* restore) {
  return caf::actor_cast<node_reporter_actor>(sys.spawn(node_reporter, out, std::move(me), last_iteration, std::move(upstream), std::move(upstream_address),
                   exit_code, linger_ms, restore));
}

} // namespace gwtf::app
