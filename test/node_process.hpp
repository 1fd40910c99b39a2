// A caf-gwtf node (node mode) as a child process of a test: started with its stdout and
// stderr in a log file, read by polling the file (bounded), killed when it goes out of scope.
#pragma once

#include <arpa/inet.h>
#include <chrono>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#include <filesystem>
#include <fstream>
#include <signal.h>
#include <spawn.h>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <thread>
#include <vector>

extern char** environ;

namespace gwtf::test {

/// A TCP connection to 127.0.0.1:port (a raw peer of a node); -1 if it cannot connect.
inline int connect_loopback(std::uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0)
    return -1;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

/// A TCP listener on 127.0.0.1 at a port the kernel picks (written to `port`); -1 on failure.
inline int listen_loopback(std::uint16_t& port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0)
    return -1;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(fd, 4) != 0
      || ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    ::close(fd);
    return -1;
  }
  port = ntohs(a.sin_port);
  return fd;
}

inline std::string read_file(const std::filesystem::path& p) {
  std::ifstream f{p};
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

struct node_process {
  pid_t pid = -1;
  std::filesystem::path log;

  /// Starts `exe --config config [args...]`, its output in `log_file`; false if it cannot start.
  bool start(const std::string& exe, const std::filesystem::path& config, std::filesystem::path log_file,
             std::vector<std::string> args = {}) {
    args.insert(args.begin(), {exe, "--config", config.string()});
    return start_argv(std::move(args), std::move(log_file));
  }

  /// Starts `argv[0] argv[1..]` (a path), its output in `log_file`; false if it cannot start.
  bool start_argv(std::vector<std::string> args, std::filesystem::path log_file) {
    log = std::move(log_file);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    std::vector<char*> argv;
    for (auto& a : args)
      argv.push_back(a.data());
    argv.push_back(nullptr);
    int rc = posix_spawn(&pid, args[0].c_str(), &fa, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    return rc == 0;
  }

  node_process() = default;
  node_process(const node_process&) = delete;
  node_process& operator=(const node_process&) = delete;
  ~node_process() { stop(); }

  /// Waits (bounded) for the process to exit: its exit code, 128 + signal, or -1 when it is
  /// still running at the limit (then it is killed).
  int wait_exit(std::chrono::seconds limit) {
    auto deadline = std::chrono::steady_clock::now() + limit;
    while (pid > 0) {
      int status = 0;
      auto r = waitpid(pid, &status, WNOHANG);
      if (r == pid) {
        pid = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      if (std::chrono::steady_clock::now() > deadline) {
        stop();
        return -1;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50)); // polling a child, not a race
    }
    return -1;
  }

  void stop() {
    if (pid > 0) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
      pid = -1;
    }
  }

  /// Waits (bounded) until the log holds `what`; returns the log.
  std::string wait_for(const std::string& what, std::chrono::seconds limit = std::chrono::seconds(30)) const {
    auto deadline = std::chrono::steady_clock::now() + limit;
    for (;;) {
      auto text = read_file(log);
      if (text.find(what) != std::string::npos || std::chrono::steady_clock::now() > deadline)
        return text;
      std::this_thread::sleep_for(std::chrono::milliseconds(20)); // polling a file, not a race
    }
  }
};

} // namespace gwtf::test
