// Ctrl-C or SIGTERM ends a run of the embedded cluster or of launch as its time running out
// would: the driver stops the hosts, and the run's summary is printed. Without it the
// default action killed the process (exit 143) with no summary and, under launch, left
// the hosts to their parent-death signal.
#pragma once

#include <atomic>
#include <csignal>
#include <mutex>
#include <ostream>
#include <string>
#include <thread>

#include <caf/actor.hpp>

namespace gwtf::app {

class run_interrupts {
public:
  /// Handles SIGINT and SIGTERM from now on (whichever thread the kernel picks, OpenBLAS's
  /// included: a handler that writes to a pipe, read by a watcher thread). One at a time.
  explicit run_interrupts(std::ostream& out);
  /// Stops watching and restores the previous handlers.
  ~run_interrupts();
  run_interrupts(const run_interrupts&) = delete;
  run_interrupts& operator=(const run_interrupts&) = delete;

  /// The driver of the run in progress, told (timeout_atom) at a signal; empty between runs.
  void set_driver(caf::actor driver);
  /// A signal came (no run after it should start).
  bool interrupted() const { return signal_ != 0; }
  /// SIGINT or SIGTERM, or 0.
  int signal() const { return signal_; }
  /// "interrupted by SIGTERM" (a failure of the run: it did not complete), or empty.
  std::string what() const;

private:
  std::mutex mtx_;
  caf::actor driver_;
  std::atomic<int> signal_{0};
  struct sigaction before_int_ {}, before_term_{};
  std::thread watcher_;
};

} // namespace gwtf::app
