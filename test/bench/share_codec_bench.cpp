// Benchmark (issue 38): what training.share_compression costs on one core: a gradient share of
// 16M values (64 MB in fp32, about half a relay stage of the 85.6M model) encoded as a sender
// does (model/share_codec.hpp: bf16; int8 with error feedback) and decoded as a receiver does,
// against one memcpy of the fp32 share in the same run (rounds alternate; medians).
//
// usage: gwtf-bench-share-codec [ROUNDS]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "model/share_codec.hpp"
#include "bench_stats.hpp"

using gwtf::bench::median;

int main(int argc, char** argv) {
  int rounds = argc > 1 ? std::atoi(argv[1]) : 10;
  if (rounds < 1) {
    std::fprintf(stderr, "usage: gwtf-bench-share-codec [ROUNDS >= 1]\n");
    return 2;
  }
  using gwtf::model::share_compression;
  const std::size_t n = 16u << 20;
  std::vector<float> share(n), work(n), out(n), residual(n, 0.0f);
  std::mt19937 rng{1};
  std::normal_distribution<float> g{0.0f, 1e-3f};
  for (auto& x : share)
    x = g(rng);
  using clock = std::chrono::steady_clock;
  auto ms = [](clock::time_point a, clock::time_point b) { return std::chrono::duration<double, std::milli>(b - a).count(); };
  std::vector<double> copy, enc_bf16, dec_bf16, enc_int8, dec_int8;
  double sink = 0;
  for (int r = 0; r < rounds; ++r) {
    auto t0 = clock::now();
    std::memcpy(work.data(), share.data(), n * sizeof(float));
    auto t1 = clock::now();
    auto b = gwtf::model::encode_share(share_compression::bf16, work.data(), n);
    auto t2 = clock::now();
    gwtf::model::decode_share(share_compression::bf16, b.bytes.data(), nullptr, n, out.data());
    auto t3 = clock::now();
    sink += out[static_cast<std::size_t>(r)];
    std::memcpy(work.data(), share.data(), n * sizeof(float));
    auto t4 = clock::now();
    auto q = gwtf::model::encode_share(share_compression::int8, work.data(), n, &residual);
    auto t5 = clock::now();
    gwtf::model::decode_share(share_compression::int8, q.bytes.data(), q.scales.data(), n, out.data());
    auto t6 = clock::now();
    sink += out[static_cast<std::size_t>(r)];
    copy.push_back(ms(t0, t1));
    enc_bf16.push_back(ms(t1, t2));
    dec_bf16.push_back(ms(t2, t3));
    enc_int8.push_back(ms(t4, t5));
    dec_int8.push_back(ms(t5, t6));
  }
  double c = median(copy);
  std::printf("share of %zu values (%.0f MB fp32), %d rounds, medians on one core\n", n, n * 4 / 1e6, rounds);
  std::printf("memcpy fp32          %8.1f ms  1.00x\n", c);
  std::printf("encode bf16          %8.1f ms  %.2fx memcpy  (%.0f MB on the wire)\n", median(enc_bf16), median(enc_bf16) / c,
              gwtf::model::share_wire_bytes(share_compression::bf16, static_cast<double>(n)) / 1e6);
  std::printf("decode bf16          %8.1f ms  %.2fx memcpy\n", median(dec_bf16), median(dec_bf16) / c);
  std::printf("encode int8 + error  %8.1f ms  %.2fx memcpy  (%.0f MB on the wire)\n", median(enc_int8), median(enc_int8) / c,
              gwtf::model::share_wire_bytes(share_compression::int8, static_cast<double>(n)) / 1e6);
  std::printf("decode int8          %8.1f ms  %.2fx memcpy\n", median(dec_int8), median(dec_int8) / c);
  return std::isfinite(sink) ? 0 : 1;
}
