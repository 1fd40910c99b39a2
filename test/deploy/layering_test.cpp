// The dependency direction of docs/architecture.md, checked on the sources themselves:
// messages/, routing/, model/ and common/ include no CAF; LibTorch appears only in model/
// sources (never in a header); nothing outside deploy/ includes deploy/.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

struct include_line {
  std::string file;
  std::string text;
};

std::vector<include_line> includes_under(const std::string& dir) {
  std::vector<include_line> out;
  for (auto& e : fs::recursive_directory_iterator(fs::path{GWTF_SOURCE_DIR} / dir)) {
    auto ext = e.path().extension();
    if (ext != ".hpp" && ext != ".cpp" && ext != ".h")
      continue;
    std::ifstream in{e.path()};
    std::string line;
    while (std::getline(in, line))
      if (line.rfind("#include", 0) == 0)
        out.push_back({e.path().string(), line});
  }
  return out;
}

bool mentions(const std::string& line, const char* what) {
  return line.find(what) != std::string::npos;
}

} // namespace

TEST_CASE("layering: no CAF below actors/") {
  for (auto dir : {"messages", "routing", "model", "common"}) {
    auto incs = includes_under(dir);
    CHECK(!incs.empty());
    for (auto& inc : incs) {
      INFO(inc.file << ": " << inc.text);
      CHECK_FALSE(mentions(inc.text, "<caf/"));
      CHECK_FALSE(mentions(inc.text, "\"actors/"));
      CHECK_FALSE(mentions(inc.text, "\"deploy/"));
    }
  }
}

TEST_CASE("layering: LibTorch only in model/ sources, never in a header") {
  for (auto dir : {"messages", "routing", "model", "common", "actors", "deploy"})
    for (auto& inc : includes_under(dir)) {
      bool torch = mentions(inc.text, "<torch/") || mentions(inc.text, "<ATen/")
                   || mentions(inc.text, "<c10/");
      if (!torch)
        continue;
      INFO(inc.file << ": " << inc.text);
      CHECK(std::string{dir} == "model");
      CHECK(fs::path{inc.file}.extension() == ".cpp");
    }
}

TEST_CASE("layering: sibling cores stay independent") {
  for (auto [dir, forbidden] : {std::pair{"messages", "\"routing/"}, {"messages", "\"model/"},
                                {"routing", "\"model/"}, {"routing", "\"messages/"},
                                {"model", "\"routing/"}, {"model", "\"messages/"}})
    for (auto& inc : includes_under(dir)) {
      INFO(inc.file << ": " << inc.text);
      CHECK_FALSE(mentions(inc.text, forbidden));
    }
}
