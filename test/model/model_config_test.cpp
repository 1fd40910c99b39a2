#include <doctest/doctest.h>

#include "validation_helpers.hpp"

#include <map>
#include <string>

#include "model/model_config.hpp"

using namespace gwtf::model;

using gwtf::test::issues_of;

TEST_CASE("model config: defaults are valid") {
  CHECK(issues_of(model_config{}).empty());
  CHECK(issues_of(training_config{}).empty());
}

TEST_CASE("model config: MLP width derives from the architecture") {
  model_config gpt;
  gpt.hidden = 128;
  CHECK(gpt.resolved_ffn_hidden() == 512);
  model_config llama = gpt;
  llama.arch = architecture::llama;
  CHECK(llama.resolved_ffn_hidden() == 352); // 8*128/3 = 341.3 -> 342 -> multiple of 32
  llama.ffn_hidden = 300;
  CHECK(llama.resolved_ffn_hidden() == 300);
}

TEST_CASE("model config: inconsistent shapes are reported") {
  model_config c;
  c.layers = 2;
  c.stages = 4; // 3 relay stages for 2 blocks
  c.arch = architecture::llama;
  c.hidden = 60;
  c.heads = 4; // head size 15: odd, RoPE needs even
  auto issues = issues_of(c);
  CHECK(issues.size() == 2);
  CHECK(issues["stages"].find("at most layers + 1 = 3") != std::string::npos);
  CHECK(issues["heads"].find("even head size") != std::string::npos);
}

TEST_CASE("data config: format and vocabulary must agree") {
  auto issues = [](const data_config& d, int vocab) { return issues_of(d, vocab); };
  data_config d;
  d.path = "corpus.txt";
  CHECK(issues(d, 256).empty());
  CHECK(issues(d, 100).count("format") == 1); // text needs all 256 byte values
  d.format = data_format::tokens;
  CHECK(issues(d, 50257).empty());
  CHECK(issues(d, 70000).count("format") == 1); // uint16 ids
  d.path.clear();
  CHECK(issues(d, 256).count("path") == 1);
}

TEST_CASE("training config: schedule and optimizer ranges") {
  training_config t;
  t.min_lr = 1.0; // above lr
  t.beta1 = 1.0;
  t.grad_clip = -1;
  t.microbatch_size = 0;
  auto out = issues_of(t);
  CHECK(out.size() == 4);
  CHECK(out["min_lr"].find("at most lr") != std::string::npos);
  CHECK(out.count("beta1") == 1);
  CHECK(out.count("grad_clip") == 1);
  CHECK(out.count("microbatch_size") == 1);
}
