#include "app/run/interrupt.hpp"

#include <cerrno>
#include <fcntl.h>
#include <unistd.h>

#include <caf/send.hpp>

#include "actors/atoms.hpp"

namespace gwtf::app {

namespace {

int signal_pipe[2] = {-1, -1}; // the handler's only way out: async-signal-safe write()

extern "C" void on_run_signal(int sig) {
  int saved = errno;
  unsigned char b = static_cast<unsigned char>(sig);
  [[maybe_unused]] auto n = ::write(signal_pipe[1], &b, 1);
  errno = saved;
}

} // namespace

run_interrupts::run_interrupts(std::ostream& out) {
  if (::pipe2(signal_pipe, O_CLOEXEC) != 0) {
    out << "# cannot watch for SIGINT/SIGTERM (pipe: " << errno << "): a signal ends the run without its summary"
        << std::endl;
    signal_pipe[0] = signal_pipe[1] = -1;
    return;
  }
  struct sigaction sa {};
  sa.sa_handler = on_run_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGINT, &sa, &before_int_);
  sigaction(SIGTERM, &sa, &before_term_);
  watcher_ = std::thread([this, &out] {
    for (;;) {
      unsigned char b = 0;
      auto n = ::read(signal_pipe[0], &b, 1);
      if (n < 0 && errno == EINTR)
        continue;
      if (n != 1 || b == 0)
        return; // 0: the destructor's
      int sig = b;
      out << "# interrupted (" << (sig == SIGINT ? "SIGINT" : "SIGTERM") << "): stopping the hosts" << std::endl;
      signal_ = sig;
      std::lock_guard<std::mutex> guard{mtx_};
      if (driver_)
        caf::anon_send(driver_, actors::timeout_atom::value);
    }
  });
}

run_interrupts::~run_interrupts() {
  if (!watcher_.joinable())
    return;
  sigaction(SIGINT, &before_int_, nullptr);
  sigaction(SIGTERM, &before_term_, nullptr);
  unsigned char stop = 0;
  [[maybe_unused]] auto n = ::write(signal_pipe[1], &stop, 1);
  watcher_.join();
  ::close(signal_pipe[0]);
  ::close(signal_pipe[1]);
  signal_pipe[0] = signal_pipe[1] = -1;
}

std::string run_interrupts::what() const {
  int sig = signal_;
  return sig == 0 ? std::string{} : std::string{"interrupted by "} + (sig == SIGINT ? "SIGINT" : "SIGTERM");
}

void run_interrupts::set_driver(caf::actor driver) {
  std::lock_guard<std::mutex> guard{mtx_};
  driver_ = std::move(driver);
  if (driver_ && signal_ != 0) // the signal came while no run was under way
    caf::anon_send(driver_, actors::timeout_atom::value);
}

} // namespace gwtf::app
