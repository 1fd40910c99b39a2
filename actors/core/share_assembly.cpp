#include "actors/core/share_assembly.hpp"

#include <algorithm>
#include <cstring>

#include "model/share_codec.hpp"

namespace gwtf::actors {

namespace {

// How a chunk's float values are encoded (training.share_compression); nullopt: not float.
std::optional<model::share_compression> encoding(wire::dtype t) {
  switch (t) {
    case wire::dtype::float32: return model::share_compression::fp32;
    case wire::dtype::bfloat16: return model::share_compression::bf16;
    case wire::dtype::int8: return model::share_compression::int8;
    default: return std::nullopt;
  }
}

// The chunk's values: dense, one dimension, as many bytes as values of their type (a float
// encoding, or int64: exact sums); int8 with a scale per block from a block's start.
bool plain(const wire::gradient_chunk& c) {
  auto& v = c.values;
  auto how = encoding(v.type);
  if (v.type == wire::dtype::int64)
    how = model::share_compression::fp32; // unscaled, as fp32
  if (!how || v.sparse || v.shape.size() != 1 || v.shape[0] < 0
      || v.size != static_cast<std::size_t>(v.shape[0]) * wire::dtype_size(v.type))
    return false;
  auto n = static_cast<std::size_t>(v.shape[0]);
  if (*how != model::share_compression::int8)
    return c.scales.empty();
  return c.scales.size() == model::share_int8_blocks(n) && c.offset % share_int8_block == 0;
}

} // namespace

share_admission admit_share(std::uint64_t iteration, std::uint64_t current, bool averaged) {
  return admit_share(iteration, current, current, averaged);
}

share_admission admit_share(std::uint64_t iteration, std::uint64_t oldest, std::uint64_t current, bool averaged) {
  if (iteration < std::min(oldest, current) || averaged)
    return share_admission::stale;
  return iteration > current + 1 ? share_admission::too_far : share_admission::take;
}

int share_assembler::kind_of(const wire::gradient_chunk& c) {
  return c.group.empty() ? 0 : c.reduced ? 2 : 1;
}

std::vector<wire::gradient_chunk> cut_share(const wire::gradient_chunk& whole, std::size_t max_elements) {
  auto total = whole.total_elements;
  auto count = whole.values.shape.size() == 1 ? static_cast<std::uint64_t>(whole.values.shape[0]) : 0;
  if (total == 0 || max_elements == 0 || count <= max_elements || !plain(whole))
    return {whole};
  auto width = wire::dtype_size(whole.values.type);
  bool scaled = whole.values.type == wire::dtype::int8;
  if (scaled) // every chunk starts at a block: its scales are whole blocks' too
    max_elements = std::max<std::size_t>(share_int8_block, max_elements / share_int8_block * share_int8_block);
  std::vector<wire::gradient_chunk> out;
  for (std::uint64_t off = 0; off < count; off += max_elements) {
    auto n = std::min<std::uint64_t>(max_elements, count - off);
    wire::gradient_chunk c;
    c.iteration = whole.iteration;
    c.stage = whole.stage;
    c.contributors = whole.contributors;
    c.microbatches = whole.microbatches;
    c.holders = whole.holders; // the decoder checks that they add up to microbatches, per chunk
    c.group = whole.group;
    c.reduced = whole.reduced;
    c.counts = whole.counts;
    c.keys_digest = whole.keys_digest;
    c.offset = whole.offset + off;
    c.total_elements = total;
    if (off == 0)
      c.reports = whole.reports;
    c.values.type = whole.values.type;
    c.values.shape = {static_cast<std::int64_t>(n)};
    c.values.size = static_cast<std::size_t>(n) * width;
    // A view into the whole share's bytes (the aliasing constructor keeps them alive).
    c.values.bytes = std::shared_ptr<const std::uint8_t>(whole.values.bytes, whole.values.bytes.get() + off * width);
    if (scaled)
      c.scales.assign(whole.scales.begin() + static_cast<std::ptrdiff_t>(off / share_int8_block),
                      whole.scales.begin() + static_cast<std::ptrdiff_t>(off / share_int8_block
                                                                          + model::share_int8_blocks(n)));
    out.push_back(std::move(c));
  }
  return out;
}

share_assembler::share_assembler(std::uint64_t stage_elements, std::size_t max_pending, std::uint64_t min_values,
                                 bool exact)
  : stage_elements_(stage_elements), max_pending_(std::max<std::size_t>(1, max_pending)), min_values_(min_values),
    exact_(exact) {
}

std::size_t share_assembler::value_bytes() const {
  return exact_ ? sizeof(std::int64_t) : sizeof(float);
}

// n values of `c` (already checked plain and of this assembler's kind) into `out`: float
// encodings decoded to float32, int64 copied.
void share_assembler::put(const wire::gradient_chunk& c, std::uint64_t n, std::uint8_t* out) const {
  if (exact_) {
    std::memcpy(out, c.values.bytes.get(), static_cast<std::size_t>(n) * sizeof(std::int64_t));
    return;
  }
  model::decode_share(*encoding(c.values.type), c.values.bytes.get(), c.scales.data(), static_cast<std::size_t>(n),
                      reinterpret_cast<float*>(out));
}

share_assembler::outcome share_assembler::add(const std::string& from, wire::gradient_chunk&& c) {
  return add(from, std::move(c), {0, stage_elements_});
}

share_assembler::outcome share_assembler::add(const std::string& from, wire::gradient_chunk&& c, share_span span) {
  outcome out;
  auto key = std::make_tuple(from, c.iteration, kind_of(c));
  if (c.total_elements == 0) { // an empty share: no microbatch counted there
    if (c.offset != 0 || c.microbatches != 0 || c.values.size != 0) {
      out.error = "an empty gradient share with values or microbatches";
      return out;
    }
    parts_.erase(key);
    out.whole = std::move(c);
    return out;
  }
  if (c.total_elements != stage_elements_) {
    out.error = "a gradient share of " + std::to_string(c.total_elements) + " values; this stage has "
                + std::to_string(stage_elements_);
    return out;
  }
  if (!plain(c)) {
    out.error = "a gradient chunk that is not a dense float32, bfloat16, int8 or int64 vector (int8: with a scale per "
                "block of " + std::to_string(share_int8_block) + " values, from a block's start)";
    return out;
  }
  if ((c.values.type == wire::dtype::int64) != exact_) {
    out.error = std::string{"a gradient chunk of "} + (exact_ ? "float" : "int64") + " values; this stage averages "
                + (exact_ ? "exact int64 sums" : "float shares") + " (training.reproducible_sums differs)";
    return out;
  }
  auto n = static_cast<std::uint64_t>(c.values.shape[0]);
  auto width = span.size();
  if (span.size() == 0 && n == 0 && c.offset == span.begin) { // an empty part (a share of fewer blocks than replicas)
    parts_.erase(key);
    out.whole = std::move(c);
    return out;
  }
  if (n == 0 || c.offset < span.begin || c.offset > span.end || n > span.end - c.offset) {
    out.error = "a gradient chunk of " + std::to_string(n) + " values at offset " + std::to_string(c.offset) + " in "
                + (c.group.empty() ? "a share of " + std::to_string(c.total_elements)
                                   : "the part [" + std::to_string(span.begin) + ", " + std::to_string(span.end) + ")");
    return out;
  }
  if (c.offset == span.begin && n == width) { // whole in one frame: nothing to put together
    parts_.erase(key);
    if (c.values.type != wire::dtype::float32 && c.values.type != wire::dtype::int64) {
      std::shared_ptr<std::uint8_t> buffer(new std::uint8_t[n * value_bytes()], std::default_delete<std::uint8_t[]>());
      put(c, n, buffer.get());
      c.values = {wire::dtype::float32, {static_cast<std::int64_t>(n)}, std::move(buffer), n * value_bytes(), false, {}};
      c.scales.clear();
    }
    out.whole = std::move(c);
    return out;
  }
  if (n < min_values_ && c.offset + n != span.end) {
    out.error = "a gradient chunk of " + std::to_string(n) + " values, fewer than " + std::to_string(min_values_)
                + " and not the share's last";
    return out;
  }
  auto it = parts_.find(key);
  if (it != parts_.end()) {
    // A chunk that overlaps what came, or whose share differs, begins the share again (a
    // repaired share replaces the one under way).
    auto& p = it->second;
    auto next = p.ranges.upper_bound(c.offset);
    bool overlaps = (next != p.ranges.end() && next->first < c.offset + n)
                    || (next != p.ranges.begin() && std::prev(next)->second > c.offset);
    if (overlaps || c.microbatches != p.head.microbatches || c.contributors != p.head.contributors
        || c.group != p.head.group || c.counts != p.head.counts || !(p.span == span)) {
      parts_.erase(it);
      it = parts_.end();
    }
  }
  if (it == parts_.end()) {
    // A peer has at most max_pending shares of each kind under way: the oldest makes room.
    std::vector<decltype(parts_)::iterator> mine;
    for (auto p = parts_.begin(); p != parts_.end(); ++p)
      if (std::get<0>(p->first) == from && std::get<2>(p->first) == std::get<2>(key))
        mine.push_back(p);
    if (mine.size() >= max_pending_) // the oldest iteration first: keys are ordered so within one peer
      parts_.erase(*std::min_element(mine.begin(), mine.end(), [](auto& a, auto& b) {
        return std::get<1>(a->first) < std::get<1>(b->first);
      }));
    it = parts_.emplace(key, part{}).first;
    auto& p = it->second;
    p.head = c;
    p.head.values = {};
    p.head.scales.clear();
    p.head.reports.clear();
    p.span = span;
    p.buffer = std::shared_ptr<std::uint8_t>(new std::uint8_t[width * value_bytes()], std::default_delete<std::uint8_t[]>());
  }
  if (c.offset == span.begin) // the first chunk carries the holders' reports
    it->second.head.reports = std::move(c.reports);
  auto& p = it->second;
  put(c, n, p.buffer.get() + (c.offset - span.begin) * value_bytes());
  p.received += n;
  p.ranges.emplace(c.offset, c.offset + n);
  if (p.received < width)
    return out;
  auto whole = std::move(p.head);
  whole.offset = span.begin;
  whole.values.type = exact_ ? wire::dtype::int64 : wire::dtype::float32;
  whole.values.shape = {static_cast<std::int64_t>(width)};
  whole.values.size = static_cast<std::size_t>(width) * value_bytes();
  whole.values.bytes = std::move(p.buffer);
  parts_.erase(it);
  out.whole = std::move(whole);
  return out;
}

void share_assembler::forget_before(std::uint64_t iteration) {
  for (auto it = parts_.begin(); it != parts_.end();)
    it = std::get<1>(it->first) < iteration ? parts_.erase(it) : std::next(it);
}

void share_assembler::forget(const std::string& from) {
  for (auto it = parts_.begin(); it != parts_.end();)
    it = std::get<0>(it->first) == from ? parts_.erase(it) : std::next(it);
}

std::size_t share_assembler::pending_bytes() const {
  std::size_t n = 0;
  for (auto& [k, p] : parts_)
    n += static_cast<std::size_t>(p.span.size()) * value_bytes();
  return n;
}

} // namespace gwtf::actors
