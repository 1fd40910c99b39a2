// A small map from peer names to values with stable addresses, for the flow balancer's peer
// table: one open-addressing probe array (hash and entry pointer per slot, linear probing)
// instead of a node-based hash map, so a lookup touches the probe array and the entry it
// finds, not a bucket array, a node and the node's far end where the hash is cached. Pure
// and single-threaded; entries keep their address until erased (the balancer keeps pointers
// to them in its roster and view).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace gwtf::routing {

template <class V>
class name_table {
public:
  using value_type = std::pair<const std::string, V>;

  name_table() = default;
  name_table(name_table&&) noexcept = default;
  name_table& operator=(name_table&&) noexcept = default;
  name_table(const name_table& other) { copy_from(other); }
  name_table& operator=(const name_table& other) {
    if (this != &other) {
      clear();
      copy_from(other);
    }
    return *this;
  }

  std::size_t size() const { return entries_.size(); }
  bool empty() const { return entries_.empty(); }

  /// The entry of `key`, or nullptr.
  value_type* find(const std::string& key) { return lookup(key, hash(key)); }
  const value_type* find(const std::string& key) const { return lookup(key, hash(key)); }

  /// The entry of `key`, added with a default value if absent (then `second` is true).
  std::pair<value_type*, bool> try_emplace(const std::string& key) {
    auto h = hash(key);
    if (auto* e = lookup(key, h))
      return {e, false};
    if ((entries_.size() + 1) * 2 > slots_.size())
      grow();
    entries_.push_back(std::make_unique<value_type>(key, V{}));
    place(h, entries_.back().get());
    return {entries_.back().get(), true};
  }

  /// Removes `entry` (from find or try_emplace); other entries keep their address.
  void erase(value_type* entry) {
    if (entry == nullptr || slots_.empty())
      return;
    auto mask = slots_.size() - 1;
    auto i = hash(entry->first) & mask;
    while (slots_[i].entry != entry) {
      if (slots_[i].entry == nullptr)
        return; // not ours
      i = (i + 1) & mask;
    }
    // Backward-shift deletion: later entries of the probe run move up into the gap.
    slots_[i] = slot{};
    for (auto j = (i + 1) & mask; slots_[j].entry != nullptr; j = (j + 1) & mask) {
      auto home = slots_[j].hash & mask;
      bool stays = i <= j ? (home > i && home <= j) : (home > i || home <= j);
      if (!stays) {
        slots_[i] = slots_[j];
        slots_[j] = slot{};
        i = j;
      }
    }
    for (std::size_t k = 0; k < entries_.size(); ++k)
      if (entries_[k].get() == entry) {
        entries_[k] = std::move(entries_.back());
        entries_.pop_back();
        break;
      }
  }

  void clear() {
    slots_.clear();
    entries_.clear();
  }

  /// Calls f(name, value) for every entry, in no particular order.
  template <class F>
  void each(F&& f) const {
    for (auto& e : entries_)
      f(e->first, e->second);
  }

private:
  struct slot {
    std::uint64_t hash = 0;
    value_type* entry = nullptr; ///< null: empty
  };

  static std::uint64_t hash(const std::string& key) { return std::hash<std::string>{}(key); }

  value_type* lookup(const std::string& key, std::uint64_t h) const {
    if (slots_.empty())
      return nullptr;
    auto mask = slots_.size() - 1;
    for (auto i = h & mask;; i = (i + 1) & mask) {
      auto& s = slots_[i];
      if (s.entry == nullptr)
        return nullptr;
      if (s.hash == h && s.entry->first == key)
        return s.entry;
    }
  }

  void place(std::uint64_t h, value_type* entry) {
    auto mask = slots_.size() - 1;
    auto i = h & mask;
    while (slots_[i].entry != nullptr)
      i = (i + 1) & mask;
    slots_[i] = slot{h, entry};
  }

  void grow() {
    std::vector<slot> old(slots_.empty() ? 16 : slots_.size() * 2);
    old.swap(slots_);
    for (auto& s : old)
      if (s.entry != nullptr)
        place(s.hash, s.entry);
  }

  void copy_from(const name_table& other) {
    for (auto& e : other.entries_)
      try_emplace(e->first).first->second = e->second;
  }

  std::vector<slot> slots_;                         ///< a power of two, at most half full
  std::vector<std::unique_ptr<value_type>> entries_; ///< owns the entries
};

} // namespace gwtf::routing
