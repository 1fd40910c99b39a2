#include "app/run/driver.hpp"

#include "app/config/derive.hpp"
#include "app/run/resume.hpp"
#include "app/run/summary.hpp"
#include "app/run/exactly_once.hpp"
#include "app/run/interrupt.hpp"
#include "app/run/random_crashes.hpp"
#include "app/run/run_report.hpp"

#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <iomanip>
#include <iostream>
#include <limits>
#include <set>
#include <sstream>

#include <caf/all.hpp>

#include "actors/interfaces.hpp"
#include "actors/system_setup.hpp"
#include "model/checkpoint.hpp"
#include "model/data.hpp"
#include "model/partition.hpp"
#include "model/torch_runtime.hpp"
#include "routing/placement.hpp"

namespace gwtf::app {

namespace {

using namespace gwtf::actors;
using clock = std::chrono::steady_clock;

struct driver_state {
  const cluster_config* cfg = nullptr;
  std::shared_ptr<const cluster_spec> spec;
  std::map<std::string, int> placed; // node mode: relays that placed themselves
  // Hosts killed (crash any) or hung, until a peer declares them dead: detection time.
  std::map<std::string, std::chrono::steady_clock::time_point> fault_at;
  std::map<std::string, std::chrono::steady_clock::time_point> joined_at; // joiners until loaded
  std::ostream* out = nullptr;
  host_control* control = nullptr;
  std::set<std::string> hosts; // started and not crashed/left
  std::set<std::string> dead;
  std::set<std::string> strangers; // names outside the roster that sent reports (dropped)
  embedded_result result;
  std::promise<void>* finished = nullptr;
  embedded_result* result_out = nullptr;
  bool done = false;
  clock::time_point start = clock::now(), last_line = clock::now();
  // per iteration
  std::map<std::uint64_t, std::map<std::string, std::tuple<std::uint32_t, double, std::uint32_t>>> reports;
  std::map<std::string, std::map<std::uint64_t, double>> compute_by_host;
  std::map<std::pair<std::uint32_t, std::uint64_t>, std::map<std::string, std::vector<std::uint64_t>>> share_keys;
  /// (stage, iteration) -> the contributors averaged and their shares' key digests
  std::map<std::pair<std::uint32_t, std::uint64_t>, std::pair<std::vector<std::string>, std::vector<std::uint64_t>>>
    contributors;
  std::set<std::uint64_t> checked; // iterations whose exactly-once check ran
  std::map<std::string, std::uint64_t> starts_at; // atom mode: the first iteration a joiner trains
  std::map<std::pair<std::uint32_t, std::uint64_t>, std::map<std::string, std::uint64_t>> hashes;
  std::set<std::uint64_t> injected;
  std::map<std::string, std::uint64_t> doomed; // armed with a random crash: the iteration it was drawn at
  std::set<std::string> faulted; // any fault was injected into it: its peers may rightly declare it dead
  std::uint64_t printed = 0;
  bool any_printed = false;
  // Iteration -> when its row was printed (every data holder had finished its microbatches):
  // the start of its averaging; its row's aggregation_s runs until the last host applied it.
  std::map<std::uint64_t, clock::time_point> done_at;
  // The end (docs/runtime.md): once the holders applied the last iteration, every host still
  // expected to has applied it and, with checkpoints on, written it and had it copied.
  bool settling = false;
  std::map<std::string, std::uint32_t> stage_applied;           // host -> its stage, as it reports
  std::set<std::string> checkpointed_last;                      // wrote the final checkpoint
  std::map<std::string, int> copies_of_last;                    // owner -> copies of it stored
};

using driver_ptr = caf::stateful_actor<driver_state>*;

/// How long the end waits for the last reports before it stops anyway (a host that never
/// reports: hung, or its messages lost); the run says so.
constexpr int settle_bound_s = 15;

void spawn_one(driver_ptr self, const host_config& h, bool joining) {
  auto& st = self->state;
  st.control->start(self, h, joining);
  st.hosts.insert(h.name);
  st.dead.erase(h.name);
}

void crash(driver_ptr self, const std::string& host, const std::string& phase) {
  auto& st = self->state;
  if (st.hosts.count(host) == 0)
    return;
  st.faulted.insert(host);
  if (phase == "any")
    st.fault_at[host] = std::chrono::steady_clock::now(); // detection time: until a peer declares it dead
  st.control->crash(self, host, phase);
}

// Whether `host` is a host of this cluster (its config's hosts): the outside checks take
// reports from those only. Anything else is one handled error per name.
bool from_roster(driver_ptr self, const std::string& host) {
  auto& st = self->state;
  for (auto& h : st.cfg->hosts)
    if (h.name == host)
      return true;
  if (st.strangers.insert(host).second && st.strangers.size() <= 100)
    st.result.failures.push_back("driver: a report from '" + host + "', which is not a host of this cluster: dropped");
  return false;
}

int stage_of(const driver_state& st, const std::string& host) {
  if (auto p = st.placed.find(host); p != st.placed.end())
    return p->second;
  for (auto& h : st.spec->hosts) // stages as placed by make_spec
    if (h.name == host)
      return h.role == host_role::data_holder ? 0 : h.stage;
  return -1;
}

// Live hosts at `stage` other than `except` that no random crash is armed on.
int survivors_at(const driver_state& st, int stage, const std::string& except) {
  int n = 0;
  for (auto& name : st.hosts)
    n += name != except && st.doomed.count(name) == 0 && stage_of(st, name) == stage;
  return n;
}

// Scripted faults and random crashes that start with iteration `i`.
void inject(driver_ptr self, std::uint64_t i) {
  auto& st = self->state;
  if (!st.injected.insert(i).second)
    return;
  for (auto& f : st.cfg->faults.script) {
    if (static_cast<std::uint64_t>(f.at_iteration) != i)
      continue;
    switch (f.action) {
      case fault_action::crash:
        crash(self, f.host, f.phase == fault_phase::forward     ? "forward"
                            : f.phase == fault_phase::backward  ? "backward"
                            : f.phase == fault_phase::averaging ? "averaging"
                                                                : "any");
        break;
      case fault_action::join:
        for (auto& h : st.cfg->hosts)
          if (h.name == f.host && st.hosts.count(h.name) == 0) {
            st.joined_at[h.name] = std::chrono::steady_clock::now(); // join cost: until its state is loaded
            spawn_one(self, h, i > 0);
            ++st.result.joins;
          }
        break;
      case fault_action::leave:
        if (st.hosts.count(f.host) > 0) {
          st.faulted.insert(f.host);
          st.control->leave(self, f.host);
        }
        break;
      case fault_action::slow_link:
        st.control->slow(self, f.host, f.peer, f.slowdown);
        break;
      case fault_action::actor_failure:
        crash(self, f.host, "actor");
        break;
      case fault_action::double_count: // no host dies: the exactly-once check must fire
        if (st.hosts.count(f.host) > 0) {
          *st.out << "# " << f.host << " adds its next microbatch's gradients twice (faults.script double_count)"
                  << std::endl;
          st.control->crash(self, f.host, "double_count");
        }
        break;
      case fault_action::hang:
        if (st.hosts.count(f.host) > 0 && st.control->hang(self, f.host)) {
          *st.out << "# " << f.host << " hangs for " << f.duration_ms << " ms" << std::endl;
          st.fault_at[f.host] = std::chrono::steady_clock::now();
          st.faulted.insert(f.host);
          self->delayed_send(self, std::chrono::milliseconds(f.duration_ms), resume_atom::value, f.host);
        }
        break;
    }
  }
  if (st.cfg->faults.crash_rate > 0) {
    // A random crash strikes in the host's next forward or backward; a relay that got no work
    // for a whole iteration since (no flow or call reached it) crashes now, idle: random churn
    // takes hosts busy or not, so every router loses the same hosts.
    for (auto& [name, at] : st.doomed)
      if (at < i && st.hosts.count(name) > 0) {
        at = std::numeric_limits<std::uint64_t>::max();
        crash(self, name, "any");
      }
    for (auto& name : st.hosts) {
      auto phase = random_crash_draw(st.cfg->training.seed, i, name, st.cfg->faults.crash_rate);
      bool holder = std::find(st.spec->holders.begin(), st.spec->holders.end(), name) != st.spec->holders.end();
      // Data holders own the data: never crashed at random. Like the paper, random churn keeps
      // one live host per stage (a stage with none cannot train, whatever the router).
      if (holder || !phase || st.doomed.count(name) > 0 || survivors_at(st, stage_of(st, name), name) == 0)
        continue;
      st.doomed[name] = i;
      crash(self, name, *phase == fault_phase::forward ? "forward" : "backward");
    }
  }
}

// The exactly-once check of iteration i over every stage averaged. Every contributor reported
// its keys when it sent its share, but a report can be late: a hung process (SIGSTOP) lost its
// connection to the launcher and sends it again once it has dialled back. Wait for a live
// contributor's report (and for every stage's average) until the end of the run.
void check_exactly_once(driver_ptr self, std::uint64_t i, bool last_chance) {
  auto& st = self->state;
  if (st.checked.count(i) > 0)
    return;
  if (st.spec->training.mode == model::training_mode::atom) { // i ends a round
    auto c = st.contributors.find({0, i});
    if (c == st.contributors.end())
      return;
    stage_counts counts{c->second.first, st.share_keys[c->first], c->second.second};
    if (!last_chance && !reports_settled(counts, st.hosts))
      return;
    st.checked.insert(i);
    for (auto& who : counts.contributors)
      st.result.carried[who] += static_cast<std::int64_t>(counts.reports[who].size());
    auto every = static_cast<std::uint64_t>(st.spec->training.atom.sync_every);
    std::set<std::string> lived; // trained the round's last iteration and landed the round, alive
    for (auto& [h, a] : st.result.last_applied)
      if (a >= i && st.hosts.count(h) > 0 && st.reports[i].count(h) > 0)
        lived.insert(h);
    for (auto& v : atom_exactly_once_violations(i / every * every, i + 1, st.spec->holders,
                                                st.spec->training.microbatches_per_holder, counts, lived))
      st.result.exactly_once_violations.push_back(v);
    return;
  }
  std::map<std::uint32_t, stage_counts> stages;
  for (auto c = st.contributors.lower_bound({0, i}); c != st.contributors.end(); ++c) {
    if (c->first.second != i)
      continue;
    stage_counts counts{c->second.first, st.share_keys[c->first], c->second.second};
    if (!last_chance && !reports_settled(counts, st.hosts))
      return;
    stages[c->first.first] = std::move(counts);
  }
  if (stages.empty() || (!last_chance && stages.size() < static_cast<std::size_t>(st.cfg->model.stages)))
    return;
  st.checked.insert(i);
  for (auto& [stage, c] : stages)
    for (auto& who : c.contributors)
      st.result.carried[who] += static_cast<std::int64_t>(c.reports[who].size());
  std::map<std::string, std::uint32_t> finished;
  for (auto& [holder, rep] : st.reports[i])
    finished[holder] = std::get<0>(rep);
  // A holder lived through i if it applied i, or reported i + 1 (which it starts only then).
  std::set<std::string> lived;
  for (auto& h : st.spec->holders) {
    auto a = st.result.last_applied.find(h);
    auto next = st.reports.find(i + 1);
    if ((a != st.result.last_applied.end() && a->second >= i) || (next != st.reports.end() && next->second.count(h) > 0))
      lived.insert(h);
  }
  for (auto& v : exactly_once_violations(i, st.spec->holders, finished, lived, stages))
    st.result.exactly_once_violations.push_back(v);
}

// Exactly-once checks of every iteration up to `last` (inclusive). A data holder reports
// iteration i+1 only after every stage applied i, an iteration after the replicas reported
// their shares of i: by then those reports have arrived, from any process.
void check_up_to(driver_ptr self, std::uint64_t last, bool last_chance = false) {
  auto& st = self->state;
  std::set<std::uint64_t> due;
  for (auto& [key, who] : st.contributors)
    if (key.second <= last && st.checked.count(key.second) == 0)
      due.insert(key.second);
  for (auto i : due)
    check_exactly_once(self, i, last_chance);
}

void maybe_print(driver_ptr self) {
  auto& st = self->state;
  for (;;) {
    auto i = st.any_printed ? st.printed + 1 : 0;
    auto it = st.reports.find(i);
    if (it == st.reports.end())
      return;
    std::size_t live_holders = 0;
    bool atom = st.spec->training.mode == model::training_mode::atom;
    for (auto& h : st.spec->holders) { // atom mode: a joiner reports from the iteration it starts at
      auto from = st.starts_at.find(h);
      bool starting = atom && (st.joined_at.count(h) > 0 || (from != st.starts_at.end() && from->second > i));
      live_holders += st.hosts.count(h) > 0 && !starting;
    }
    if (it->second.size() < std::max<std::size_t>(1, live_holders))
      return;
    std::uint32_t mbs = 0, flows = 0;
    double loss = 0;
    for (auto& [h, r] : it->second) {
      mbs += std::get<0>(r);
      loss += std::get<1>(r);
      flows += std::get<2>(r);
    }
    auto now = clock::now();
    double secs = std::chrono::duration<double>(now - st.last_line).count();
    st.last_line = now;
    iteration_row row;
    row.iteration = static_cast<std::int64_t>(i);
    row.loss = mbs > 0 ? loss / mbs : 0;
    row.tokens_per_s = secs > 0 ? mbs * double(st.cfg->training.microbatch_size) * st.cfg->model.seq_len / secs : 0;
    row.seconds = secs;
    row.flows = static_cast<int>(flows);
    row.hosts_alive = static_cast<int>(st.hosts.size());
    row.crashes = st.result.crashes;
    row.wasted_fraction = st.result.compute_s > 0 ? st.result.wasted_s / st.result.compute_s : 0;
    st.result.rows.push_back(row);
    st.done_at[i] = now;
    *st.out << "iter " << std::setw(4) << i << " | loss " << std::fixed << std::setprecision(4) << row.loss
            << " | " << std::setprecision(0) << std::setw(6) << row.tokens_per_s << " tok/s | flows "
            << row.flows << " | hosts " << row.hosts_alive << " | crashes " << row.crashes
            << " | wasted " << std::setprecision(2) << 100 * row.wasted_fraction << "%" << std::endl;
    st.printed = i;
    st.any_printed = true;
    if (i > 0)
      check_up_to(self, i - 1);
    inject(self, i + 1);
  }
}

// Whether the run can stop without cutting off the last iteration's reports: every live host
// (not faulted, not a joiner still loading) applied it and, with checkpoints on, wrote its
// final checkpoint and has it copied to as many hosts of other stages as it could choose.
bool settled(const driver_state& st) {
  auto last = st.spec->end_iteration() - 1;
  std::vector<std::string> expected;
  for (auto& h : st.hosts)
    if (st.fault_at.count(h) == 0 && st.joined_at.count(h) == 0)
      expected.push_back(h);
  for (auto& h : expected)
    if (auto a = st.result.last_applied.find(h); a == st.result.last_applied.end() || a->second != last)
      return false;
  auto& training = st.spec->training;
  if (training.checkpoint_every <= 0 || st.spec->data_dir.empty())
    return true;
  for (auto& h : expected) {
    if (st.checkpointed_last.count(h) == 0)
      return false;
    int others = 0;
    for (auto& g : expected)
      others += st.stage_applied.at(g) != st.stage_applied.at(h);
    auto c = st.copies_of_last.find(h);
    if ((c == st.copies_of_last.end() ? 0 : c->second) < std::min(training.checkpoint_replicas, others))
      return false;
  }
  return true;
}

void finish(driver_ptr self);

void maybe_settled(driver_ptr self) {
  if (self->state.settling && settled(self->state))
    finish(self);
}

void finish(driver_ptr self) {
  auto& st = self->state;
  if (st.done)
    return;
  st.done = true;
  check_up_to(self, std::numeric_limits<std::uint64_t>::max(), true);
  st.result.wall_s = std::chrono::duration<double>(clock::now() - st.start).count();
  st.result.gone = st.dead;
  st.result.faults_through = st.injected.empty() ? 0 : *st.injected.rbegin();
  for (auto& [host, by_iteration] : st.compute_by_host)
    for (auto& [i, secs] : by_iteration)
      st.result.live_compute[i] += secs;
  auto stop = [self] {
    auto& st = self->state;
    st.control->stop_all(self);
    *st.result_out = st.result;
    st.finished->set_value();
    self->quit();
  };
  // The run report's final flow graph: every live host's flows, each asked with a bound.
  std::map<std::string, supervisor_actor> asked;
  if (!st.cfg->training.loss_out.empty())
    for (auto& [name, sup] : st.control->supervisors())
      if (st.hosts.count(name) > 0 && sup)
        asked[name] = sup;
  if (asked.empty()) {
    stop();
    return;
  }
  auto waiting = std::make_shared<std::size_t>(asked.size());
  for (auto& [name, sup] : asked)
    self->request(sup, std::chrono::seconds(2), inspect_atom::value, std::string{"flows"})
      .then(
        [self, stop, waiting, name = name](std::string& answer) {
          self->state.result.final_flows[name] = std::move(answer);
          if (--*waiting == 0)
            stop();
        },
        [stop, waiting](caf::error&) {
          if (--*waiting == 0)
            stop();
        });
}

// A host is gone: crashed (everything it computed since its last applied iteration is
// wasted) or left.
void host_gone(driver_ptr self, const std::string& name, bool crashed) {
  auto& st = self->state;
  if (st.hosts.erase(name) == 0)
    return;
  st.dead.insert(name);
  if (!st.done) {
    if (crashed) {
      ++st.result.crashes;
      auto last = st.result.last_applied.count(name) ? st.result.last_applied[name] + 1 : 0;
      for (auto& [i, s] : st.compute_by_host[name])
        if (i >= last)
          st.result.wasted_s += s;
      st.compute_by_host.erase(name);
    } else if (!st.result.completed) { // after it, hosts leave because the run is over
      ++st.result.departures;
    }
    // The last replica of a relay stage is gone: no ring can close. With checkpoints the run
    // stops here and the caller restores the stage from the newest cut (docs/checkpoints.md).
    int stage = stage_of(st, name);
    bool checkpoints = !st.spec->data_dir.empty() && st.spec->training.checkpoint_every > 0;
    if (checkpoints && stage > 0 && !st.result.completed) {
      // A joiner still downloading does not count: no replica is left to serve it; the
      // restore gives it the stage's checkpoint instead.
      bool left = false;
      for (auto& h : st.hosts)
        left = left || (stage_of(st, h) == stage && st.joined_at.count(h) == 0);
      if (!left) {
        *st.out << "# every replica of stage " << stage << " is gone (" << name
                << " was the last): no ring can close; stopping to restore it from the checkpoints" << std::endl;
        st.result.lost_stage = stage;
        finish(self);
        return;
      }
    }
  }
  maybe_print(self);
}

caf::behavior driver(driver_ptr self, const cluster_config* cfg, std::shared_ptr<const cluster_spec> spec,
                     host_control* control, std::ostream* out, std::promise<void>* finished,
                     embedded_result* result) {
  auto& st = self->state;
  st.finished = finished;
  st.result_out = result;
  st.cfg = cfg;
  st.spec = spec;
  st.out = out;
  st.control = control;
  control->init(self);
  for (auto& h : cfg->hosts)
    if (!joins_by_script(*cfg, h.name))
      spawn_one(self, h, false);
  // A resumed run starts at its checkpoint's iteration: the first report is of that one.
  auto first = spec->resume && spec->resume_at ? *spec->resume_at : 0;
  if (first > 0) {
    st.printed = first - 1;
    st.any_printed = true;
  }
  inject(self, first);
  self->set_down_handler([self](caf::down_msg& m) {
    if (auto gone = self->state.control->on_down(m))
      host_gone(self, gone->first, gone->second);
  });
  self->set_exit_handler([self](caf::exit_msg& m) {
    if (m.reason)
      self->state.result.failures.push_back("driver: a linked actor failed: " + self->system().render(m.reason));
    finish(self);
  });
  return driver_actor::behavior_type{
    [self](iteration_atom, const std::string& holder, std::uint64_t i, std::uint32_t mbs, double loss_sum,
           std::uint32_t flows) {
      if (!from_roster(self, holder))
        return;
      self->state.reports[i][holder] = {mbs, loss_sum, flows};
      maybe_print(self);
    },
    [self](share_atom, const std::string& host, std::uint32_t stage, std::uint64_t i,
           const std::vector<std::uint64_t>& keys) {
      if (from_roster(self, host))
        self->state.share_keys[{stage, i}][host] = keys;
    },
    [self](averaged_atom, const std::string& host, std::uint32_t stage, std::uint64_t i,
           const std::vector<std::string>& contributors, const std::vector<std::uint64_t>& digests) {
      if (!from_roster(self, host))
        return;
      // Checked once the reports of every replica are surely in (check_up_to): the shares of
      // other processes may still be on their way. An empty list (no microbatch counted at
      // this stage) is checked too: it is a violation if the holders finished any.
      self->state.contributors.emplace(std::make_pair(stage, i), std::make_pair(contributors, digests));
    },
    [self](applied_atom, const std::string& host, std::uint32_t stage, std::uint64_t i, std::uint64_t hash) {
      if (!from_roster(self, host))
        return;
      auto& st = self->state;
      auto& last_applied = st.result.last_applied[host];
      last_applied = std::max(last_applied, i); // a replayed report (node reporter) is older
      // The averaging of i lasts until its last apply before the next iteration's row (a
      // joiner that loads i's state later does not stretch it). With overlap i's step comes at
      // i + 1's boundary: what the averaging adds is the wait from i + 1's row to that step (the
      // last iteration's, from its own row: nothing follows it).
      bool late = st.spec->training.averaging == model::averaging_mode::overlap && i + 1 < st.spec->end_iteration();
      auto row = late ? i + 1 : i;
      if (auto d = st.done_at.find(row); d != st.done_at.end() && st.printed == row && !st.result.rows.empty()
                                           && st.result.rows.back().iteration == static_cast<std::int64_t>(row))
        st.result.rows.back().aggregation_s
          = std::max(st.result.rows.back().aggregation_s, std::chrono::duration<double>(clock::now() - d->second).count());
      st.result.final_hashes[static_cast<int>(stage)][host] = hash;
      for (auto& [other, hashes] : st.result.final_hashes) // a host that moved (SWARM's rebalancing) is where it is now
        if (other != static_cast<int>(stage) && i >= last_applied)
          hashes.erase(host);
      // Every replica that applied an iteration must hold the same weights after it.
      auto& seen = st.hashes[{stage, i}];
      if (!seen.empty() && seen.begin()->second != hash)
        st.result.replica_disagreements.push_back("stage " + std::to_string(stage) + " iteration "
                                                  + std::to_string(i) + ": " + host + " differs from "
                                                  + seen.begin()->first);
      seen[host] = hash;
      st.stage_applied[host] = stage;
      auto last = st.spec->end_iteration() - 1;
      if (i == last) {
        bool all = true;
        for (auto& h : st.spec->holders)
          if (st.hosts.count(h) && (!st.result.last_applied.count(h) || st.result.last_applied[h] != last))
            all = false;
        if (all && !st.settling) {
          // The other stages' last steps, checkpoints and copies are still on their way: stop
          // when they are in (maybe_settled), or after a bound if a host never reports.
          st.result.completed = true;
          st.settling = true;
          self->delayed_send(self, std::chrono::seconds(settle_bound_s), settle_atom::value);
        }
      }
      maybe_settled(self);
    },
    [self](compute_atom, const std::string& host, std::uint64_t i, double secs, double wasted) {
      auto& st = self->state;
      st.result.compute_s += secs;
      st.result.wasted_s += wasted;
      st.result.host_compute_s[host] += secs;
      st.compute_by_host[host][i] += secs;
    },
    [self](peer_down_atom, const std::string& host, const std::string& peer) {
      auto& st = self->state;
      if (!st.done && st.hosts.count(peer) > 0 && st.faulted.count(peer) == 0 && st.result.false_deaths.size() < 1000)
        st.result.false_deaths.push_back(host + " declared " + peer + " dead");
      auto f = st.fault_at.find(peer);
      if (f == st.fault_at.end())
        return;
      auto ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - f->second).count();
      st.fault_at.erase(f);
      *st.out << "# " << peer << " declared dead by " << host << " " << static_cast<long long>(ms)
              << " ms after the fault" << std::endl;
    },
    [self](placed_atom, const std::string& host, std::int32_t stage, const std::string& why) {
      self->state.placed[host] = stage;
      *self->state.out << "# " << host << " placed itself at stage " << stage << " (" << why << ")" << std::endl;
    },
    [self](joined_atom, const std::string& host, std::uint64_t steps, std::uint64_t bytes) {
      auto& st = self->state;
      st.result.joined.push_back(host);
      if (st.spec->training.mode == model::training_mode::atom) // it reports from that iteration on
        st.starts_at[host] = steps;
      *st.out << "# " << host << " loaded its stage state (" << steps << " steps applied, " << bytes << " bytes";
      if (auto j = st.joined_at.find(host); j != st.joined_at.end()) {
        auto ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - j->second).count();
        *st.out << ", " << static_cast<long long>(ms) << " ms after its start";
        st.joined_at.erase(j);
      }
      *st.out << ")" << std::endl;
    },
    [self](checkpoint_atom, const std::string& host, std::uint32_t, std::uint64_t i, std::uint64_t, double ms,
           const std::string&) {
      auto& r = self->state.result;
      ++r.checkpoints;
      r.checkpoint_ms += ms;
      r.last_checkpoint = std::max(r.last_checkpoint, i);
      if (i == self->state.spec->end_iteration())
        self->state.checkpointed_last.insert(host);
      maybe_settled(self);
    },
    [self](loaded_atom, const std::string& host, std::uint32_t stage, std::uint64_t i, std::uint64_t hash,
           const std::string& path) {
      self->state.result.resumed[host] = {i, hash};
      *self->state.out << "# " << host << " resumed stage " << stage << " at iteration " << i << " from " << path
                       << std::endl;
    },
    [self](served_atom, const std::string& host, const std::string& peer, std::uint32_t stage, std::uint64_t i,
           std::uint64_t bytes, const std::string&) {
      *self->state.out << "# " << host << " sent " << peer << " the checkpoint of stage " << stage << " at iteration "
                       << i << " (" << bytes << " bytes)" << std::endl;
    },
    [self](replica_atom, const std::string&, const std::string& owner, std::uint32_t, std::uint64_t i, std::uint64_t,
           const std::string&) {
      ++self->state.result.checkpoint_replicas;
      if (i == self->state.spec->end_iteration())
        ++self->state.copies_of_last[owner];
      maybe_settled(self);
    },
    [self](settle_atom) {
      auto& st = self->state;
      if (!st.done && !settled(st))
        *st.out << "# stopping after " << settle_bound_s
                << " s without every host's last step, checkpoint and copies reported" << std::endl;
      finish(self);
    },
    [self](restart_atom, const std::string& host, const std::string& why) {
      ++self->state.result.restarts;
      *self->state.out << "# " << host << ": local actor restarted (" << why << ")" << std::endl;
    },
    [self](left_atom, const std::string& host, const std::string& why) {
      *self->state.out << "# " << host << " left: " << why << std::endl;
    },
    [self](reload_atom, const std::string& host, const std::string& why) {
      ++self->state.result.reloads;
      *self->state.out << "# " << host << ": " << why << std::endl;
    },
    [self](verdict_atom, const std::string& host, const std::string& what) {
      *self->state.out << "# " << host << ": " << what << std::endl;
    },
    [self](failure_atom, const std::string& host, const std::string& what) {
      auto& f = self->state.result.failures;
      if (f.size() < 20)
        *self->state.out << "# " << host << ": " << what << std::endl;
      if (f.size() < 1000)
        f.push_back(host + ": " + what);
    },
    [self](stop_atom) { finish(self); },
    [self](timeout_atom) { finish(self); },
    [self](exited_atom, const std::string& host, bool crashed) { host_gone(self, host, crashed); },
    [self](resume_atom, const std::string& host) {
      *self->state.out << "# " << host << " resumes" << std::endl;
      self->state.control->resume(self, host);
    },
    [self](register_atom, const std::string& host, caf::actor supervisor, caf::actor link) {
      self->state.control->attached(self, host, caf::actor_cast<supervisor_actor>(supervisor),
                                    caf::actor_cast<net_link_actor>(link));
    },
    [self](restore_atom, const std::string& host, std::uint32_t stage, std::uint64_t i, const std::string& restorer,
           std::int32_t, const std::string&, std::int32_t) {
      // Node mode's self-restore: a node's reporter handles it (it restarts its process);
      // the driver only tells.
      *self->state.out << "# " << host << ": stage " << stage << " is restored by " << restorer << " at iteration "
                       << i << std::endl;
    },
  }.unbox();
}

} // namespace

embedded_result run_driver(const cluster_config& cfg, std::shared_ptr<const actors::cluster_spec> spec,
                           host_control& control, bool with_network,
                           std::ostream& out, double timeout_s, run_interrupts* interrupts) {
  embedded_result result;
  // The embedded cluster serves its shell on node.inspect through the middleman too.
  actors::system_config sc{cfg.node, cfg.faults, with_network, !cfg.node.inspect.empty()};
  std::promise<void> done;
  auto finished = done.get_future();
  {
    caf::actor_system sys{sc};
    auto d = caf::actor_cast<driver_actor>(sys.spawn(driver, &cfg, spec, &control, &out, &done, &result));
    if (interrupts)
      interrupts->set_driver(caf::actor_cast<caf::actor>(d));
    if (finished.wait_for(std::chrono::duration<double>(timeout_s)) != std::future_status::ready) {
      out << "# timed out after " << timeout_s << " s\n";
      caf::anon_send(d, timeout_atom::value);
      finished.wait();
    }
    if (interrupts)
      interrupts->set_driver({});
  }
  return result;
}

} // namespace gwtf::app
