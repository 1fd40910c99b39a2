// Adaptive activation compression (issue 17, after FusionLLM's AdaTopK; docs/compression.md):
// how one activation (or its gradient) crosses one link. A link whose dense transfer takes no
// longer than the receiving stage's compute for it carries the tensor dense (16-bit values);
// a slower link carries only the k values of largest magnitude with their positions, k chosen
// so that the transfer takes about as long as that compute, never fewer than a minimum density.
// Pure: the runtime feeds it the link probe's bandwidth and a measured compute time, the
// simulator the scenario's links and hosts.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <utility>

namespace gwtf::routing {

/// compression.* with mode adaptive (docs/config.md).
struct compression_policy {
  double min_density = 0.1;    ///< the fewest values kept, as a fraction of the tensor, in (0, 1]
  bool every_link = false;     ///< compression.links all: every link at min_density
  std::size_t value_bytes = 2; ///< bytes of one kept value on the wire (fp16)
};

/// Bytes of one kept value's position on the wire (a uint32 flat index).
constexpr std::size_t sparse_index_bytes = 4;

/// What one tensor of `elements` values costs on a link.
struct wire_plan {
  bool sparse = false;      ///< top-k values and their positions; else every value
  std::int64_t keep = 0;    ///< values sent (= elements when dense)
  double bytes = 0;         ///< payload bytes on the link
};

/// The plan for a tensor of `elements` values over a link of `bandwidth_bytes_s` (nullopt:
/// not measured yet: dense), received by a stage that computes on it for `receiver_compute_s`
/// seconds (<= 0: not measured yet: dense). Sparse only when it sends fewer bytes than dense.
wire_plan plan_wire(const compression_policy& policy, std::int64_t elements,
                    std::optional<double> bandwidth_bytes_s, double receiver_compute_s);

/// Which links adaptive compression may sparsify (compression.links of a cluster config and
/// of a scenario): only links slower than the receiver's compute, or every link.
enum class compression_links { slow, all };

constexpr std::array<std::pair<compression_links, const char*>, 2> enum_names(compression_links) {
  return {{{compression_links::slow, "slow"}, {compression_links::all, "all"}}};
}

} // namespace gwtf::routing
