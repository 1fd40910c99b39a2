// The tests' main: doctest's, plus one rule. A run whose filters select no test case fails.
// CTest runs each case as `--test-case=NAME`; a name that CMake's list handling cuts (a ';')
// or a renamed case would otherwise run nothing and pass, silently.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>

namespace {

int selected_cases = -1; // -1: no test run happened (--help, --list-test-cases, ...)

struct selection_listener : doctest::IReporter {
  explicit selection_listener(const doctest::ContextOptions&) {}
  void report_query(const doctest::QueryData&) override {}
  void test_run_start() override {}
  void test_run_end(const doctest::TestRunStats& stats) override {
    selected_cases = static_cast<int>(stats.numTestCasesPassingFilters);
  }
  void test_case_start(const doctest::TestCaseData&) override {}
  void test_case_reenter(const doctest::TestCaseData&) override {}
  void test_case_end(const doctest::CurrentTestCaseStats&) override {}
  void test_case_exception(const doctest::TestCaseException&) override {}
  void subcase_start(const doctest::SubcaseSignature&) override {}
  void subcase_end() override {}
  void log_assert(const doctest::AssertData&) override {}
  void log_message(const doctest::MessageData&) override {}
  void test_case_skipped(const doctest::TestCaseData&) override {}
};

} // namespace

DOCTEST_REGISTER_LISTENER("selection", 1, selection_listener);

int main(int argc, char** argv) {
  doctest::Context context(argc, argv);
  int result = context.run();
  if (context.shouldExit())
    return result;
  if (selected_cases == 0) {
    std::fprintf(stderr, "no test case matches the filters given: nothing was tested (a ';' in a test "
                         "case's name breaks CTest's --test-case filter)\n");
    return result != 0 ? result : 1;
  }
  return result;
}
