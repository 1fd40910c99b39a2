#include "actors/net/peer_framing.hpp"

#include <algorithm>
#include <cstdio>

namespace gwtf::actors {

namespace peer_framing {

namespace {
constexpr std::uint8_t magic[4] = {'G', 'W', 'T', 'F'};
constexpr std::int32_t stage_service = 3; // actors/atoms.hpp service::stage (checked there)

void put32(std::uint8_t* at, std::uint32_t v) {
  at[0] = static_cast<std::uint8_t>(v >> 24);
  at[1] = static_cast<std::uint8_t>(v >> 16);
  at[2] = static_cast<std::uint8_t>(v >> 8);
  at[3] = static_cast<std::uint8_t>(v);
}

std::uint32_t get32(const std::uint8_t* at) {
  return (std::uint32_t{at[0]} << 24) | (std::uint32_t{at[1]} << 16) | (std::uint32_t{at[2]} << 8) | at[3];
}
} // namespace

lane lane_of(std::int32_t service) { return service == stage_service ? bulk : control; }

void write_header(std::vector<std::uint8_t>& out, std::uint8_t lane, std::uint8_t flags, std::int32_t service,
                  std::uint32_t length, std::uint32_t total) {
  auto at = out.size();
  out.resize(at + header_bytes);
  write_header(out.data() + at, lane, flags, service, length, total);
}

void write_header(std::uint8_t* h, std::uint8_t lane, std::uint8_t flags, std::int32_t service,
                  std::uint32_t length, std::uint32_t total) {
  std::copy(magic, magic + 4, h);
  h[4] = lane;
  h[5] = flags;
  h[6] = static_cast<std::uint8_t>(service);
  h[7] = version;
  put32(h + 8, length);
  put32(h + 12, total);
}

std::vector<std::uint8_t> hello_bytes() {
  std::vector<std::uint8_t> out;
  write_header(out, control, hello | first | last, 0, 0, 0);
  return out;
}

std::uint32_t read32(const std::uint8_t* at) { return get32(at); }

} // namespace peer_framing

std::string frame_reader::fail(std::string why) {
  error_ = std::move(why);
  for (auto& p : partial_)
    p = partial{};
  return error_;
}

std::string frame_reader::on_header() {
  namespace pf = peer_framing;
  const auto* h = header_;
  if (h[0] != 'G' || h[1] != 'W' || h[2] != 'T' || h[3] != 'F') {
    char first[32];
    std::snprintf(first, sizeof first, "%02x %02x %02x %02x", h[0], h[1], h[2], h[3]);
    return fail(std::string{"not a caf-gwtf peer (a fragment starting "} + first + ", expected \"GWTF\")");
  }
  if (h[7] != pf::version)
    return fail("peer speaks framing version " + std::to_string(h[7]) + ", this host "
                + std::to_string(pf::version));
  auto length = pf::read32(h + 8);
  auto total = pf::read32(h + 12);
  lane_ = h[4];
  flags_ = h[5];
  if (!greeted_) {
    if ((flags_ & pf::hello) == 0 || length != 0)
      return fail("the stream did not start with a hello");
    greeted_ = true;
    return {};
  }
  if ((flags_ & pf::hello) != 0)
    return fail("a second hello");
  if (lane_ >= pf::lanes)
    return fail("a fragment on lane " + std::to_string(lane_));
  auto& p = partial_[lane_];
  if ((flags_ & pf::first) != 0) {
    if (p.open)
      return fail("a new frame on lane " + std::to_string(lane_) + " before the last one ended");
    if (total > max_frame_)
      return fail("a frame announcing " + std::to_string(total) + " bytes (limit " + std::to_string(max_frame_)
                  + ", node.max_message_bytes)");
    p.open = true;
    p.total = total;
    p.frame.service = h[6];
    p.frame.introduction = (flags_ & pf::introduction) != 0;
    p.frame.bytes = {}; // grows with the bytes that arrive (space), never from `total`
  } else if (!p.open) {
    return fail("a continuation on lane " + std::to_string(lane_) + " without a first fragment");
  } else if (total != p.total || h[6] != static_cast<std::uint8_t>(p.frame.service)) {
    return fail("a continuation that changes its frame's size or service");
  }
  if (length > pf::fragment_bytes)
    return fail("a fragment of " + std::to_string(length) + " bytes (at most " + std::to_string(pf::fragment_bytes)
                + ")");
  if (std::uint64_t{p.frame.bytes.size()} + length > p.total)
    return fail("fragments beyond their frame's announced " + std::to_string(p.total) + " bytes");
  payload_left_ = length;
  fragment_length_ = length;
  fragment_at_ = p.frame.bytes.size();
  return {};
}

void frame_reader::fragment_done(std::vector<inbound_frame>& out) {
  namespace pf = peer_framing;
  have_ = 0;
  auto& p = partial_[lane_];
  if ((flags_ & pf::last) == 0)
    return;
  if (p.frame.bytes.size() != p.total) {
    fail("a frame ended after " + std::to_string(p.frame.bytes.size()) + " of its announced "
         + std::to_string(p.total) + " bytes");
    return;
  }
  out.push_back(std::move(p.frame));
  p = partial{};
  ++frames_;
}

std::pair<std::uint8_t*, std::size_t> frame_reader::space() {
  if (!error_.empty())
    return {nullptr, 0};
  if (payload_left_ == 0)
    return {header_ + have_, peer_framing::header_bytes - have_};
  auto& bytes = partial_[lane_].frame.bytes;
  auto end = fragment_at_ + fragment_length_;
  if (bytes.size() < end) { // the whole fragment at once (at most fragment_bytes)
    make_room(end);
    bytes.resize(end);
  }
  return {bytes.data() + end - payload_left_, payload_left_};
}

void frame_reader::make_room(std::size_t end) {
  // Memory follows the bytes that came: 256 KiB first, then 4 times what the buffer held
  // (fewer copies of a large frame than doubling), never above the frame's size.
  auto& p = partial_[lane_];
  auto cap = p.frame.bytes.capacity();
  if (cap < end)
    p.frame.bytes.reserve(std::min<std::size_t>(p.total, std::max({end, 4 * cap, peer_framing::first_room})));
}

std::size_t frame_reader::buffered() const {
  std::size_t n = 0;
  for (auto& p : partial_)
    n += p.frame.bytes.capacity();
  return n;
}

std::string frame_reader::wrote(std::size_t n, std::vector<inbound_frame>& out) {
  namespace pf = peer_framing;
  if (!error_.empty() || n == 0)
    return error_;
  if (payload_left_ > 0) {
    payload_left_ -= static_cast<std::uint32_t>(n);
    if (payload_left_ == 0)
      fragment_done(out);
    return error_;
  }
  have_ += n;
  if (have_ < pf::header_bytes)
    return error_;
  if (auto why = on_header(); !why.empty())
    return why;
  if ((flags_ & pf::hello) != 0)
    have_ = 0;
  else if (payload_left_ == 0)
    fragment_done(out); // an empty fragment
  return error_;
}

std::string frame_reader::feed(const std::uint8_t* data, std::size_t n, std::vector<inbound_frame>& out) {
  while (error_.empty() && n > 0) {
    if (payload_left_ > 0) {
      auto& bytes = partial_[lane_].frame.bytes;
      auto k = static_cast<std::size_t>(std::min<std::uint64_t>(payload_left_, n));
      auto filled = fragment_at_ + (fragment_length_ - payload_left_);
      if (bytes.size() == filled) { // no space opened: append without zeroing first
        make_room(filled + k);
        bytes.insert(bytes.end(), data, data + k);
      }
      else
        std::copy(data, data + k, bytes.data() + filled);
      data += k;
      n -= k;
      wrote(k, out);
      continue;
    }
    auto [at, k] = space();
    k = std::min(k, n);
    std::copy(data, data + k, at);
    data += k;
    n -= k;
    wrote(k, out);
  }
  return error_;
}

void frame_writer::push(std::int32_t service, bool introduction, std::vector<std::uint8_t> bytes, bool behind_bulk) {
  auto lane = behind_bulk ? peer_framing::bulk : peer_framing::lane_of(service);
  queued_bytes_ += bytes.size();
  q_[lane].push_back(pending{service, introduction, std::move(bytes)});
}

std::size_t frame_writer::header_for(const pending& f, std::uint8_t lane, std::size_t at, std::uint8_t* header) {
  namespace pf = peer_framing;
  auto k = std::min(pf::fragment_bytes, f.bytes.size() - at);
  std::uint8_t flags = 0;
  if (at == 0)
    flags |= pf::first;
  if (at + k == f.bytes.size())
    flags |= pf::last;
  if (f.introduction)
    flags |= pf::introduction;
  pf::write_header(header, lane, flags, f.service, static_cast<std::uint32_t>(k),
                   static_cast<std::uint32_t>(f.bytes.size()));
  return k;
}

std::size_t frame_writer::gather(iovec* iov, std::size_t max_iov, std::size_t max_bytes) {
  namespace pf = peer_framing;
  std::size_t used = 0, total = 0;
  auto add = [&](const std::uint8_t* p, std::size_t n) {
    if (n == 0 || used == max_iov || total >= max_bytes)
      return;
    n = std::min(n, max_bytes - total);
    iov[used++] = iovec{const_cast<std::uint8_t*>(p), n};
    total += n;
  };
  if (current_.active) {
    auto& c = current_;
    if (c.done < pf::header_bytes)
      add(c.header + c.done, pf::header_bytes - c.done);
    auto payload_done = c.done > pf::header_bytes ? c.done - pf::header_bytes : 0;
    add(c.payload + payload_done, c.length - payload_done);
  }
  // The fragments that `consumed` will cut next, in its order, without cutting them.
  headers_.clear();
  headers_.reserve(max_iov / 2 + 1); // no reallocation below: the iovecs point into it
  std::size_t index[pf::lanes] = {0, 0};
  std::size_t at[pf::lanes] = {0, 0};
  for (std::uint8_t lane = 0; lane < pf::lanes; ++lane)
    if (!q_[lane].empty()) {
      if (!has_more(q_[lane].front()))
        index[lane] = 1; // its last fragment is the current one
      else
        at[lane] = q_[lane].front().cut;
    }
  while (used + 2 <= max_iov && total < max_bytes && headers_.size() < max_iov / 2 + 1) {
    int lane = -1;
    for (std::uint8_t l = 0; l < pf::lanes && lane < 0; ++l)
      if (index[l] < q_[l].size())
        lane = l;
    if (lane < 0)
      break;
    auto& f = q_[lane][index[lane]];
    auto& h = headers_.emplace_back();
    auto k = header_for(f, static_cast<std::uint8_t>(lane), at[lane], h.data());
    add(h.data(), pf::header_bytes);
    add(f.bytes.data() + at[lane], k);
    at[lane] += k;
    if (at[lane] == f.bytes.size()) {
      ++index[lane];
      at[lane] = 0;
    }
  }
  return used;
}

void frame_writer::consumed(std::size_t n) {
  namespace pf = peer_framing;
  while (n > 0) {
    auto& c = current_;
    if (!c.active) {
      int lane = q_[0].empty() ? 1 : 0;
      if (q_[lane].empty())
        return; // more than was gathered: cannot happen
      auto& f = q_[lane].front();
      c.active = true;
      c.lane = static_cast<std::uint8_t>(lane);
      c.length = header_for(f, c.lane, f.cut, c.header);
      c.payload = f.bytes.data() + f.cut;
      c.done = 0;
      f.cut += c.length;
      f.begun = true;
      queued_bytes_ -= c.length;
    }
    auto take = std::min(n, pf::header_bytes + c.length - c.done);
    c.done += take;
    n -= take;
    if (c.done == pf::header_bytes + c.length) {
      c.active = false;
      auto& q = q_[c.lane];
      if (!has_more(q.front()))
        q.pop_front();
    }
  }
}

bool frame_writer::next(std::vector<std::uint8_t>& out) {
  iovec iov[2];
  auto n = gather(iov, 2, static_cast<std::size_t>(-1));
  std::size_t total = 0;
  for (std::size_t i = 0; i < n; ++i) {
    auto* p = static_cast<const std::uint8_t*>(iov[i].iov_base);
    out.insert(out.end(), p, p + iov[i].iov_len);
    total += iov[i].iov_len;
  }
  consumed(total);
  return n > 0;
}

} // namespace gwtf::actors
