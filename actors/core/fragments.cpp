#include "actors/core/fragments.hpp"

#include <algorithm>
#include <cstring>

namespace gwtf::actors {

std::vector<wire::fragment> cut_message(const std::vector<std::uint8_t>& bytes, std::uint64_t id, std::size_t piece) {
  piece = std::max<std::size_t>(piece, 1);
  std::vector<wire::fragment> out;
  out.reserve((bytes.size() + piece - 1) / piece);
  for (std::size_t at = 0; at < bytes.size(); at += piece) {
    auto n = std::min(piece, bytes.size() - at);
    out.push_back(wire::fragment{id, at, bytes.size(),
                                 std::vector<std::uint8_t>(bytes.begin() + static_cast<std::ptrdiff_t>(at),
                                                           bytes.begin() + static_cast<std::ptrdiff_t>(at + n))});
  }
  return out;
}

std::uint64_t largest_message_bytes(std::uint64_t activation_values, std::uint64_t frame_limit) {
  return std::max<std::uint64_t>(frame_limit, 2 * 6 * activation_values + (1u << 20));
}

fragment_assembler::fragment_assembler(fragment_limits limits) : limits_(limits) {
  limits_.per_peer = std::max<std::size_t>(limits_.per_peer, 1);
}

void fragment_assembler::drop(const key& k) {
  auto it = partials_.find(k);
  if (it == partials_.end())
    return;
  held_ -= it->second.bytes.size();
  partials_.erase(it);
  order_.remove(k);
}

fragment_assembler::outcome fragment_assembler::add(const std::string& from, wire::fragment&& piece) {
  outcome out;
  key k{from, piece.id};
  auto n = static_cast<std::uint64_t>(piece.data.size());
  auto refuse = [&](const std::string& why) {
    drop(k);
    out.error = "message " + std::to_string(piece.id) + " in pieces: " + why;
    return out;
  };
  auto span = [&] {
    return "[" + std::to_string(piece.offset) + ", +" + std::to_string(n) + ") of " + std::to_string(piece.total_bytes)
           + " bytes";
  };
  // The decoder checked 0 < n <= total - offset.
  if (piece.total_bytes > limits_.max_message)
    return refuse(std::to_string(piece.total_bytes) + " bytes, above the " + std::to_string(limits_.max_message)
                  + " of the largest message this model makes");
  if (n < limits_.min_piece && piece.offset + n != piece.total_bytes)
    return refuse("a piece of " + span() + ", smaller than " + std::to_string(limits_.min_piece)
                  + " bytes and not its message's last");
  auto it = partials_.find(k);
  if (it == partials_.end()) {
    if (n == piece.total_bytes) { // the whole message in one piece
      out.whole = std::move(piece.data);
      return out;
    }
    std::size_t mine = 0;
    for (auto& q : order_)
      mine += q.first == from;
    while (mine >= limits_.per_peer) { // the peer's oldest goes
      drop(*std::find_if(order_.begin(), order_.end(), [&](const key& q) { return q.first == from; }));
      --mine;
    }
    while (!order_.empty() && held_ + piece.total_bytes > limits_.max_bytes)
      drop(order_.front()); // anyone's oldest
    if (held_ + piece.total_bytes > limits_.max_bytes)
      return refuse(std::to_string(piece.total_bytes) + " bytes, above the " + std::to_string(limits_.max_bytes)
                    + " held for all messages in pieces");
    it = partials_.emplace(k, partial{}).first;
    it->second.bytes.resize(piece.total_bytes);
    held_ += piece.total_bytes;
    order_.push_back(k);
  }
  auto& p = it->second;
  if (piece.total_bytes != p.bytes.size())
    return refuse("a piece of " + span() + ", a message of " + std::to_string(p.bytes.size()) + " bytes");
  auto end = piece.offset + n;
  auto next = p.ranges.lower_bound(end); // the first range starting at or after the end
  auto prev = next == p.ranges.begin() ? p.ranges.end() : std::prev(next);
  if (prev != p.ranges.end() && prev->second > piece.offset)
    return refuse("a piece of " + span() + " overlaps what came");
  std::memcpy(p.bytes.data() + piece.offset, piece.data.data(), n);
  p.received += n;
  // Keep the ranges merged: [offset, end) joins its neighbours where they touch.
  auto begin = piece.offset;
  if (prev != p.ranges.end() && prev->second == begin) {
    begin = prev->first;
    p.ranges.erase(prev);
  }
  if (next != p.ranges.end() && next->first == end) {
    end = next->second;
    p.ranges.erase(next);
  }
  p.ranges[begin] = end;
  if (p.received == p.bytes.size()) {
    out.whole = std::move(p.bytes);
    held_ -= piece.total_bytes;
    partials_.erase(it);
    order_.remove(k);
  }
  return out;
}

void fragment_assembler::forget(const std::string& from) {
  std::vector<key> gone;
  for (auto& q : order_)
    if (q.first == from)
      gone.push_back(q);
  for (auto& q : gone)
    drop(q);
}

} // namespace gwtf::actors
