// Runs a shell command from a test and collects what it printed (stdout and stderr, in
// order) and its exit code. Shared by the tests that run the real executable.
#pragma once

#include <array>
#include <cstdio>
#include <string>
#include <sys/wait.h>

#include <doctest/doctest.h>

namespace gwtf::test {

struct run_result {
  int code = -1;    ///< exit code; -1 when killed by a signal
  std::string out;  ///< stdout and stderr, in order
};

inline run_result run_command(const std::string& cmd) {
  run_result r;
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  REQUIRE(p != nullptr);
  std::array<char, 4096> buf{};
  size_t n = 0;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0)
    r.out.append(buf.data(), n);
  int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

} // namespace gwtf::test
