// Benchmark of the wire layer (docs/benchmarks.md):
//  1. encode + decode of an 8 MiB activation against memcpy of the same bytes, in one run;
//  2. round-trip latency of a small message (flow_request) to a second process over CAF.
// usage: gwtf-bench-wire [ROUNDS] [ROUND_TRIPS]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include "../actors/peer_process.hpp"
#include "actors/system_setup.hpp"
#include "actors/net/wire_frame.hpp"

using namespace gwtf;
using clock_type = std::chrono::steady_clock;

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double seconds_since(clock_type::time_point t) {
  return std::chrono::duration<double>(clock_type::now() - t).count();
}

} // namespace

int main(int argc, char** argv) {
  int rounds = argc > 1 ? std::atoi(argv[1]) : 30;
  int trips = argc > 2 ? std::atoi(argv[2]) : 2000;

  // --- 1. throughput -----------------------------------------------------------------
  constexpr std::size_t bytes = 8u << 20;
  std::vector<float> values(bytes / sizeof(float));
  for (std::size_t i = 0; i < values.size(); ++i)
    values[i] = static_cast<float>(i % 1000) * 0.001f;
  wire::activation act;
  act.microbatch = {1, 0, 0};
  act.path = {"dh-virginia", "r1-ohio"};
  act.tensor = wire::tensor_payload::copy_of(wire::dtype::float32, {4, 512, 1024}, values.data(), bytes);
  wire::message msg{act};
  std::vector<double> codec_s, memcpy_fresh_s, memcpy_warm_s, steady_s;
  std::vector<std::uint8_t> warm(bytes);
  auto send_buffer = std::make_shared<std::vector<std::uint8_t>>();
  std::size_t sink = 0;
  for (int r = 0; r < rounds; ++r) {
    auto t0 = clock_type::now();
    auto encoded = wire::encode(msg);
    auto decoded = wire::decode(encoded.data(), encoded.size());
    codec_s.push_back(seconds_since(t0));
    sink += std::get<wire::activation>(std::get<wire::message>(decoded)).tensor.size;

    // The same work as encode + decode without a format: two copies into fresh buffers.
    t0 = clock_type::now();
    std::vector<std::uint8_t> a(bytes);
    std::memcpy(a.data(), values.data(), bytes);
    std::unique_ptr<std::uint8_t[]> b(new std::uint8_t[bytes]);
    std::memcpy(b.get(), a.data(), bytes);
    memcpy_fresh_s.push_back(seconds_since(t0));
    sink += b[bytes - 1];

    t0 = clock_type::now();
    std::memcpy(warm.data(), values.data(), bytes);
    memcpy_warm_s.push_back(seconds_since(t0));
    sink += warm[7];

    // Steady state of a stage: the send buffer is reused, the received frame is handed
    // over to the decoder (tensor bytes not copied). One copy of the tensor in all.
    t0 = clock_type::now();
    wire::encode(msg, *send_buffer);
    auto zero_copy = wire::decode(std::shared_ptr<const std::vector<std::uint8_t>>(send_buffer));
    steady_s.push_back(seconds_since(t0));
    sink += std::get<wire::activation>(std::get<wire::message>(zero_copy)).tensor.size;
  }
  double mib = static_cast<double>(bytes) / (1 << 20);
  double gbs = static_cast<double>(bytes) / 1e9;
  std::printf("8 MiB activation, %d rounds (median):\n", rounds);
  std::printf("  encode+decode (2 copies)         %7.2f ms  %6.2f GB/s\n", median(codec_s) * 1e3, gbs / median(codec_s));
  std::printf("  2 x memcpy into fresh buffers    %7.2f ms  %6.2f GB/s\n", median(memcpy_fresh_s) * 1e3, gbs / median(memcpy_fresh_s));
  std::printf("  1 x memcpy into a warm buffer    %7.2f ms  %6.2f GB/s\n", median(memcpy_warm_s) * 1e3, gbs / median(memcpy_warm_s));
  std::printf("  codec / (2 x memcpy fresh) time  %7.3f   (%.0f MiB, checksum %zu)\n",
              median(codec_s) / median(memcpy_fresh_s), mib, sink % 7);
  std::printf("  steady state: encode into a reused buffer + zero-copy decode\n"
              "                                   %7.2f ms  %6.2f GB/s  (%.2fx the warm memcpy time)\n",
              median(steady_s) * 1e3, gbs / median(steady_s), median(steady_s) / median(memcpy_warm_s));

  // --- 2. round trips to a second process ---------------------------------------------
  test::peer_process peer{GWTF_WIRE_PEER, "67108864"};
  actors::system_config cfg{actors::node_config{}, actors::fault_config{}, true};
  caf::actor_system sys{cfg};
  auto remote = sys.middleman().remote_actor("127.0.0.1", peer.port());
  if (!remote) {
    std::fprintf(stderr, "connect failed: %s\n", sys.render(remote.error()).c_str());
    return 1;
  }
  caf::scoped_actor self{sys};
  auto frame = actors::make_frame(wire::flow_request{42, "dh-virginia", 0.25});
  std::vector<double> rtt;
  for (int i = 0; i < trips + 100; ++i) {
    auto t0 = clock_type::now();
    bool ok = false;
    self->request(*remote, std::chrono::seconds{10}, frame)
      .receive([&](actors::wire_frame&) { ok = true; }, [&](caf::error&) {});
    if (!ok)
      return 1;
    if (i >= 100) // warm-up excluded
      rtt.push_back(seconds_since(t0));
  }
  std::sort(rtt.begin(), rtt.end());
  std::printf("flow_request round trip to another process on 127.0.0.1 (%zu bytes, %d trips):\n",
              frame.bytes.size(), trips);
  std::printf("  median %.1f us   p90 %.1f us   p99 %.1f us\n", rtt[rtt.size() / 2] * 1e6,
              rtt[rtt.size() * 9 / 10] * 1e6, rtt[rtt.size() * 99 / 100] * 1e6);
  return 0;
}
