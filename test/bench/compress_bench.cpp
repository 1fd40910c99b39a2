// Benchmark (issue 17): what compression.mode costs on one core: an activation of 16.8 MB
// (fp32 [4, 1024, 1024]: microbatch 4, 1024 tokens, hidden 1024) rounded to fp16 / bf16 for
// the wire and back to fp32 at the receiver, and (adaptive) its top-k at densities 0.1 and
// 0.01 with error feedback (model/sparse.hpp: what a sender does) and the scatter back to a
// dense tensor (what a receiver does), against one memcpy of the fp32 tensor in the same run
// (rounds alternate; medians).
//
// usage: gwtf-bench-compress [ROUNDS]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <torch/torch.h>

#include "model/sparse.hpp"
#include "model/torch_runtime.hpp"
#include "bench_stats.hpp"

using gwtf::bench::median;

int main(int argc, char** argv) {
  int rounds = argc > 1 ? std::atoi(argv[1]) : 30;
  if (rounds < 1) {
    std::fprintf(stderr, "usage: gwtf-bench-compress [ROUNDS >= 1]\n");
    return 2;
  }
  gwtf::model::configure_torch(1);
  torch::manual_seed(1);
  auto x = torch::randn({4, 1024, 1024});
  auto bytes = static_cast<std::size_t>(x.numel()) * sizeof(float);
  std::vector<std::uint8_t> dst(bytes);
  std::memset(dst.data(), 1, bytes); // warm
  using clock = std::chrono::steady_clock;
  auto ms = [](clock::time_point a, clock::time_point b) { return std::chrono::duration<double, std::milli>(b - a).count(); };
  std::vector<double> copy, half, bf16;
  std::vector<double> topk[2], scatter[2];
  const double densities[2] = {0.1, 0.01};
  torch::Tensor residual[2];
  double sink = 0;
  for (int r = 0; r < rounds; ++r) {
    auto t0 = clock::now();
    std::memcpy(dst.data(), x.data_ptr<float>(), bytes);
    auto t1 = clock::now();
    auto h = x.to(torch::kHalf).to(torch::kFloat);
    auto t2 = clock::now();
    auto b = x.to(torch::kBFloat16).to(torch::kFloat);
    auto t3 = clock::now();
    for (int d = 0; d < 2; ++d) {
      auto keep = static_cast<std::int64_t>(densities[d] * static_cast<double>(x.numel()));
      auto t4 = clock::now();
      auto sp = gwtf::model::top_k(x, keep, torch::kHalf, &residual[d]);
      auto t5 = clock::now();
      auto back = gwtf::model::densify(sp.values, sp.indices, {4, 1024, 1024});
      auto t6 = clock::now();
      topk[d].push_back(ms(t4, t5));
      scatter[d].push_back(ms(t5, t6));
      sink += back[0][0][r % 1024].item<float>();
    }
    sink += dst[r % bytes] + h[0][0][r % 1024].item<float>() + b[0][0][r % 1024].item<float>();
    copy.push_back(ms(t0, t1));
    half.push_back(ms(t1, t2));
    bf16.push_back(ms(t2, t3));
  }
  double c = median(copy), hh = median(half), bb = median(bf16);
  double gb = static_cast<double>(bytes) / 1e9;
  std::printf("activation: %.1f MB fp32, %d rounds, medians (one core)\n", static_cast<double>(bytes) / 1e6, rounds);
  std::printf("memcpy fp32:                 %7.2f ms  %6.2f GB/s\n", c, gb / (c / 1000));
  std::printf("fp32 -> fp16 -> fp32:        %7.2f ms  %6.2f GB/s  %.2fx memcpy\n", hh, gb / (hh / 1000), hh / c);
  std::printf("fp32 -> bf16 -> fp32:        %7.2f ms  %6.2f GB/s  %.2fx memcpy\n", bb, gb / (bb / 1000), bb / c);
  // The wire saves half of the bytes: worth it where sending 8.4 MB takes longer than this.
  std::printf("break-even link (fp16): %.0f Mbit/s (below it, 16 bits save more time than they cost)\n",
              (static_cast<double>(bytes) / 2 * 8 / 1e6) / (hh / 1000));
  for (int d = 0; d < 2; ++d) {
    double k = median(topk[d]), sc = median(scatter[d]);
    std::printf("top-k %.2f + error feedback:  %7.2f ms  %.2fx memcpy; scatter back %7.2f ms  %.2fx memcpy\n",
                densities[d], k, k / c, sc, sc / c);
    // Against dense fp16: saves (2 - 6 x density) bytes per value, costs top-k + scatter.
    double saved_mbit = static_cast<double>(x.numel()) * (2 - 6 * densities[d]) * 8 / 1e6;
    std::printf("  pays off against dense fp16 below %.0f Mbit/s\n", saved_mbit / ((k + sc) / 1000));
  }
  return sink == 12345.678 ? 1 : 0;
}
