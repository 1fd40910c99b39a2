// Exactly once in node mode, as a pure core (docs/runtime.md, "Exactly once in node mode"):
// no driver sees a hand-run cluster, so each stage checks what it can. Every replica's share
// carries the sum (mod 2^64) of mix64(key) over the microbatch keys whose gradients it added,
// a key as often as it was added (model::stage::additions). At the averaging point a replica
// compares the sum over the shares it averages with what each data holder's microbatches
// 0..n-1 give, n the holder's microbatches in those shares: a key added twice, one missing,
// or one of another iteration makes them differ (but for a 2^-64 chance).
#pragma once

#include <cstdint>
#include <map>
#include <vector>

namespace gwtf::actors {

/// The digest of `keys` (microbatch_id::key), order-free, each occurrence counted.
std::uint64_t key_digest(const std::vector<std::uint64_t>& keys);

/// The digest of microbatches 0..n-1 of each holder (by index) at `iteration`.
std::uint64_t expected_digest(std::uint64_t iteration, const std::map<std::uint32_t, std::int64_t>& per_holder);

} // namespace gwtf::actors
