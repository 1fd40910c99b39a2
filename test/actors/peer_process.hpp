// gwtf-wire-peer as a child process (tests and benchmarks): started with pipes, its port
// read from its stdout; closing its stdin stops it.
#pragma once

#include <cstdio>
#include <signal.h>
#include <spawn.h>
#include <stdexcept>
#include <string>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

namespace gwtf::test {

class peer_process {
public:
  /// Starts `exe` with `arg`; throws std::runtime_error if it does not come up.
  peer_process(const std::string& exe, const std::string& arg) {
    int to_child[2];
    int from_child[2];
    if (pipe(to_child) != 0 || pipe(from_child) != 0)
      throw std::runtime_error("pipe failed");
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, to_child[0], 0);
    posix_spawn_file_actions_adddup2(&fa, from_child[1], 1);
    posix_spawn_file_actions_addclose(&fa, to_child[1]);
    posix_spawn_file_actions_addclose(&fa, from_child[0]);
    std::string path = exe;
    std::string a = arg;
    char* argv[] = {path.data(), a.data(), nullptr};
    int rc = posix_spawn(&pid_, path.c_str(), &fa, nullptr, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(to_child[0]);
    close(from_child[1]);
    stdin_ = to_child[1];
    if (rc != 0)
      throw std::runtime_error("cannot start " + exe);
    FILE* out = fdopen(from_child[0], "r");
    int p = 0;
    // Blocks until the peer has published (or died: then fscanf fails).
    bool ok = out != nullptr && std::fscanf(out, "port %d", &p) == 1;
    if (out != nullptr)
      std::fclose(out);
    if (!ok)
      throw std::runtime_error(exe + " did not report its port");
    port_ = static_cast<std::uint16_t>(p);
  }

  peer_process(const peer_process&) = delete;
  peer_process& operator=(const peer_process&) = delete;

  ~peer_process() {
    close(stdin_);
    int status = 0;
    waitpid(pid_, &status, 0);
  }

  std::uint16_t port() const { return port_; }
  bool alive() const { return kill(pid_, 0) == 0; }

private:
  pid_t pid_ = -1;
  int stdin_ = -1;
  std::uint16_t port_ = 0;
};

} // namespace gwtf::test
