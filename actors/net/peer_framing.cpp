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
    p.frame.bytes.clear();
    p.frame.bytes.reserve(total);
  } else if (!p.open) {
    return fail("a continuation on lane " + std::to_string(lane_) + " without a first fragment");
  } else if (total != p.total || h[6] != static_cast<std::uint8_t>(p.frame.service)) {
    return fail("a continuation that changes its frame's size or service");
  }
  if (std::uint64_t{p.frame.bytes.size()} + length > p.total)
    return fail("fragments beyond their frame's announced " + std::to_string(p.total) + " bytes");
  payload_left_ = length;
  return {};
}

std::string frame_reader::feed(const std::uint8_t* data, std::size_t n, std::vector<inbound_frame>& out) {
  namespace pf = peer_framing;
  while (error_.empty()) {
    if (payload_left_ > 0) {
      if (n == 0)
        break;
      auto k = static_cast<std::size_t>(std::min<std::uint64_t>(payload_left_, n));
      auto& bytes = partial_[lane_].frame.bytes;
      bytes.insert(bytes.end(), data, data + k);
      payload_left_ -= static_cast<std::uint32_t>(k);
      data += k;
      n -= k;
      if (payload_left_ > 0)
        break;
    } else {
      if (n == 0)
        break;
      auto k = std::min(pf::header_bytes - have_, n);
      std::copy(data, data + k, header_ + have_);
      have_ += k;
      data += k;
      n -= k;
      if (have_ < pf::header_bytes)
        break;
      if (auto why = on_header(); !why.empty())
        return why;
      if ((flags_ & pf::hello) != 0) {
        have_ = 0;
        continue;
      }
      if (payload_left_ > 0)
        continue;
    }
    // The fragment is complete.
    have_ = 0;
    auto& p = partial_[lane_];
    if ((flags_ & pf::last) != 0) {
      if (p.frame.bytes.size() != p.total)
        return fail("a frame ended after " + std::to_string(p.frame.bytes.size()) + " of its announced "
                    + std::to_string(p.total) + " bytes");
      out.push_back(std::move(p.frame));
      p = partial{};
      ++frames_;
    }
  }
  return error_;
}

void frame_writer::push(std::int32_t service, bool introduction, std::vector<std::uint8_t> bytes, bool behind_bulk) {
  auto lane = behind_bulk ? peer_framing::bulk : peer_framing::lane_of(service);
  queued_bytes_ += bytes.size();
  q_[lane].push_back(pending{service, introduction, std::move(bytes), 0});
}

bool frame_writer::cut(std::uint8_t* header, const std::uint8_t*& payload, std::size_t& length) {
  namespace pf = peer_framing;
  for (std::uint8_t lane = 0; lane < pf::lanes; ++lane) {
    auto& q = q_[lane];
    if (q.empty())
      continue;
    auto& f = q.front();
    auto k = std::min(pf::fragment_bytes, f.bytes.size() - f.sent);
    std::uint8_t flags = 0;
    if (f.sent == 0)
      flags |= pf::first;
    if (f.sent + k == f.bytes.size())
      flags |= pf::last;
    if (f.introduction)
      flags |= pf::introduction;
    pf::write_header(header, lane, flags, f.service, static_cast<std::uint32_t>(k),
                     static_cast<std::uint32_t>(f.bytes.size()));
    payload = f.bytes.data() + f.sent;
    length = k;
    f.sent += k;
    queued_bytes_ -= k;
    cut_lane_ = lane;
    return true;
  }
  return false;
}

void frame_writer::done_with_fragment() {
  if (cut_lane_ < 0)
    return;
  auto& q = q_[cut_lane_];
  if (!q.empty() && q.front().sent == q.front().bytes.size())
    q.pop_front();
  cut_lane_ = -1;
}

bool frame_writer::next(std::vector<std::uint8_t>& out) {
  return next_with([&](const std::uint8_t* h, std::size_t hn, const std::uint8_t* p, std::size_t pn) {
    out.insert(out.end(), h, h + hn);
    out.insert(out.end(), p, p + pn);
  });
}

} // namespace gwtf::actors
