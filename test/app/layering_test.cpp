// The dependency direction of docs/architecture.md, checked on the sources themselves:
// messages/, routing/, sim/, model/, common/ and actors/core/ include no CAF; nothing outside app/
// includes app/; LibTorch is included directly only in model/, and no actors/ or app/ header
// includes a model/ header that carries it, except the compute actor's private *_internal.hpp,
// which only its .cpp files include.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <set>
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
  for (auto dir : {"messages", "routing", "sim", "model", "common"}) {
    auto incs = includes_under(dir);
    CHECK(!incs.empty());
    for (auto& inc : incs) {
      INFO(inc.file << ": " << inc.text);
      CHECK_FALSE(mentions(inc.text, "<caf/"));
      CHECK_FALSE(mentions(inc.text, "\"actors/"));
      CHECK_FALSE(mentions(inc.text, "\"app/"));
    }
  }
}

TEST_CASE("layering: the protocol cores in actors/core/ include no CAF and no actor shell") {
  auto incs = includes_under("actors/core");
  CHECK(!incs.empty());
  for (auto& inc : incs) {
    INFO(inc.file << ": " << inc.text);
    CHECK_FALSE(mentions(inc.text, "<caf/"));
    for (auto shell : {"\"actors/host/", "\"actors/compute/", "\"actors/net/", "\"actors/inspect/",
                       "\"actors/interfaces.hpp\"", "\"actors/system_setup.hpp\""})
      CHECK_FALSE(mentions(inc.text, shell));
  }
}

TEST_CASE("layering: the executable (app/) is the top: nothing else includes it") {
  for (auto dir : {"messages", "routing", "sim", "model", "common", "actors"})
    for (auto& inc : includes_under(dir)) {
      INFO(inc.file << ": " << inc.text);
      CHECK_FALSE(mentions(inc.text, "\"app/"));
    }
}

TEST_CASE("layering: LibTorch only inside model/, and no widely included actors/ or app/ header pulls it in") {
  auto is_torch = [](const std::string& line) {
    return mentions(line, "<torch/") || mentions(line, "<ATen/") || mentions(line, "<c10/");
  };
  for (auto dir : {"messages", "routing", "sim", "common", "actors", "app"})
    for (auto& inc : includes_under(dir)) {
      INFO(inc.file << ": " << inc.text);
      CHECK_FALSE(is_torch(inc.text));
    }
  // model/ headers that carry LibTorch, directly or through another model/ header.
  std::set<std::string> torch_headers;
  auto model_incs = includes_under("model");
  for (bool grew = true; grew;) {
    grew = false;
    for (auto& inc : model_incs) {
      auto header = "model/" + fs::path{inc.file}.filename().string();
      if (fs::path{inc.file}.extension() != ".hpp" || torch_headers.count(header) > 0)
        continue;
      bool carries = is_torch(inc.text);
      for (auto& t : torch_headers)
        carries = carries || mentions(inc.text, ("\"" + t + "\"").c_str());
      if (carries) {
        torch_headers.insert(header);
        grew = true;
      }
    }
  }
  CHECK(torch_headers.count("model/stage.hpp") == 1);
  CHECK(torch_headers.count("model/model_config.hpp") == 0);
  // sim/ uses only the torch-free part of model/ (sizes from model/sizing.hpp).
  for (auto& inc : includes_under("sim"))
    for (auto& h : torch_headers) {
      INFO(inc.file << ": " << inc.text);
      CHECK_FALSE(mentions(inc.text, ("\"" + h + "\"").c_str()));
    }
  // An actors/ or app/ header may carry LibTorch only when it is private to the compute
  // actor's sources: named *_internal.hpp and included by .cpp files only.
  auto carries_torch = [&](const std::string& text) {
    for (auto& t : torch_headers)
      if (mentions(text, ("\"" + t + "\"").c_str()))
        return true;
    return false;
  };
  std::set<std::string> private_torch_headers;
  for (auto dir : {"actors", "app"})
    for (auto& inc : includes_under(dir)) {
      auto path = fs::path{inc.file};
      if (path.extension() != ".hpp" || !carries_torch(inc.text))
        continue;
      INFO(inc.file << ": " << inc.text);
      auto name = path.filename().string();
      CHECK(name.size() > 13);
      CHECK(name.rfind("_internal.hpp") == name.size() - 13);
      private_torch_headers.insert(fs::relative(path, fs::path{GWTF_SOURCE_DIR}).generic_string());
    }
  for (auto dir : {"actors", "app"})
    for (auto& inc : includes_under(dir))
      for (auto& h : private_torch_headers) {
        INFO(inc.file << ": " << inc.text);
        if (mentions(inc.text, ("\"" + h + "\"").c_str()))
          CHECK(fs::path{inc.file}.extension() == ".cpp");
      }
}

TEST_CASE("layering: sibling cores stay independent") {
  // routing/ may speak the plain message structs (messages/types.hpp), never the codec.
  // sim/ is a runtime above routing/: no core below it, and no runtime, includes it. It reads
  // model/'s torch-free sizing (checked in the LibTorch case above).
  for (auto [dir, forbidden] : {std::pair{"messages", "\"routing/"}, {"messages", "\"model/"},
                                {"routing", "\"model/"}, {"routing", "\"messages/codec"},
                                {"routing", "capnp"}, {"model", "\"routing/"},
                                {"model", "\"messages/"}, {"routing", "\"sim/"}, {"messages", "\"sim/"},
                                {"model", "\"sim/"}, {"actors", "\"sim/"},
                                {"sim", "\"messages/codec"}, {"sim", "capnp"}})
    for (auto& inc : includes_under(dir)) {
      INFO(inc.file << ": " << inc.text);
      CHECK_FALSE(mentions(inc.text, forbidden));
    }
}
