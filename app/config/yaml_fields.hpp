// Generic YAML reading and writing over the field lists (visit_fields) of config structs.
// Internal to app/: one reader for every section, so that every key gets the same
// checks (type, range via validate(), unknown keys, duplicates) and the same error format.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <type_traits>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "app/config/cluster_config.hpp"

namespace gwtf::app::detail {

// --- type traits --------------------------------------------------------------------------

struct probe_visitor {
  template <class T>
  void operator()(const char*, T&) {}
};

template <class T, class = void>
struct has_fields : std::false_type {};
template <class T>
struct has_fields<T, std::void_t<decltype(visit_fields(std::declval<probe_visitor&>(),
                                                       std::declval<T&>()))>> : std::true_type {};

template <class T, class = void>
struct has_enum_names : std::false_type {};
template <class T>
struct has_enum_names<T, std::void_t<decltype(enum_names(T{}))>> : std::is_enum<T> {};

template <class T>
struct is_vector : std::false_type {};
template <class T, class A>
struct is_vector<std::vector<T, A>> : std::true_type {};

/// A list of config structs (as opposed to a list of scalars).
template <class T>
struct is_struct_vector : std::false_type {};
template <class T, class A>
struct is_struct_vector<std::vector<T, A>> : has_fields<T> {};

template <class T>
struct is_optional : std::false_type {};
template <class T>
struct is_optional<std::optional<T>> : std::true_type {};

/// "a.b" from "a" and "b"; "b" when the parent is the root.
std::string join_path(const std::string& parent, const std::string& key);

/// Levenshtein distance, for "did you mean" hints.
std::size_t edit_distance(const std::string& a, const std::string& b);

/// Shortest decimal text that reads back as exactly `v`.
std::string format_double(double v);

/// Parses text into a YAML document, or records the parser's error.
std::optional<YAML::Node> parse_yaml(const std::string& text, const std::string& file,
                                     std::vector<config_error>& errors);

/// A whole file's text, or nullopt with `why`.
std::optional<std::string> slurp(const std::filesystem::path& file, std::string& why);

/// `p` resolved against `base_dir` when relative, absolute and normalised.
std::filesystem::path resolve(const std::filesystem::path& base_dir, const std::string& p);

// --- reader -------------------------------------------------------------------------------

/// Reads YAML nodes into config structs, collecting errors with file, line and key path.
class reader {
public:
  reader(std::string file, std::vector<config_error>& errors)
    : file_(std::move(file)), errors_(errors) {}

  /// Records an error at a node's position.
  void error_at(const YAML::Mark& mark, const std::string& key, std::string message);

  /// Records an error about the value at `path`: its position, or its key's when null.
  void error_on(const YAML::Node& node, const std::string& path, std::string message);

  /// Records an error at the closest known position of `key` (or of its parent).
  void error_for(const std::string& key, std::string message);

  /// Reads `node` into `out`; `path` names it in errors.
  template <class T>
  void read(const YAML::Node& node, const std::string& path, T& out);

  /// Errors about `path` and the keys below it name `source` (e.g. "--set a.b=1") instead of
  /// a position in the file. The last call for a path wins.
  void override_source(const std::string& path, std::string source);

private:
  template <class T>
  struct map_visitor;

  bool scalar_or_error(const YAML::Node& node, const std::string& path, const char* what,
                       bool allow_quoted);
  bool read_integer(const YAML::Node& node, const std::string& path, long long lo,
                    unsigned long long hi, long long* s, unsigned long long* u);
  void read_double(const YAML::Node& node, const std::string& path, double& out);
  void read_string(const YAML::Node& node, const std::string& path, std::string& out);
  void report_unknown(const YAML::Node& key_node, const std::string& path, const std::string& key,
                      const std::vector<std::string>& known);

  std::string file_;
  std::vector<config_error>& errors_;
  std::map<std::string, YAML::Mark> marks_;
  std::vector<std::pair<std::string, std::string>> sources_; // path, what set it
};

template <class T>
struct reader::map_visitor {
  reader& self;
  const std::string& path;
  std::map<std::string, std::pair<YAML::Node, YAML::Node>>& entries;
  std::set<std::string>& used;
  std::vector<std::string>& known;

  template <class U>
  void operator()(const char* key, U& value) {
    known.emplace_back(key);
    auto it = entries.find(key);
    if (it == entries.end())
      return;
    used.insert(key);
    // A null value has no position of its own (yaml-cpp marks the next token): use the key's.
    self.marks_[join_path(path, key)] = it->second.first.Mark();
    if constexpr (is_optional<U>::value) {
      value.emplace();
      self.read(it->second.second, join_path(path, key), *value);
    } else {
      self.read(it->second.second, join_path(path, key), value);
    }
  }
};

template <class T>
void reader::read(const YAML::Node& node, const std::string& path, T& out) {
  if (!node.IsNull())
    marks_[path] = node.Mark();
  if constexpr (has_fields<T>::value) {
    if (node.IsNull())
      return; // an empty section keeps its defaults
    if (!node.IsMap()) {
      error_at(node.Mark(), path, "expected a map of keys");
      return;
    }
    std::map<std::string, std::pair<YAML::Node, YAML::Node>> entries;
    for (auto it = node.begin(); it != node.end(); ++it) {
      if (!it->first.IsScalar()) {
        error_at(it->first.Mark(), path, "expected a plain key, got a complex key");
        continue;
      }
      auto key = it->first.Scalar();
      if (!entries.emplace(key, std::make_pair(it->first, it->second)).second)
        error_at(it->first.Mark(), join_path(path, key), "duplicate key (each key once)");
    }
    std::set<std::string> used;
    std::vector<std::string> known;
    map_visitor<T> v{*this, path, entries, used, known};
    visit_fields(v, out);
    for (auto& [key, nodes] : entries)
      if (used.count(key) == 0)
        report_unknown(nodes.first, path, key, known);
  } else if constexpr (is_vector<T>::value) {
    if (node.IsNull()) {
      out.clear();
      return;
    }
    if (!node.IsSequence()) {
      error_at(node.Mark(), path, "expected a list");
      return;
    }
    out.clear();
    out.resize(node.size());
    for (std::size_t i = 0; i < node.size(); ++i)
      read(node[i], path + "[" + std::to_string(i) + "]", out[i]);
  } else if constexpr (has_enum_names<T>::value) {
    constexpr auto names = enum_names(T{});
    std::string choices;
    for (auto& [value, name] : names)
      choices += (choices.empty() ? "" : ", ") + std::string{name};
    if (!scalar_or_error(node, path, ("one of " + choices).c_str(), true))
      return;
    for (auto& [value, name] : names)
      if (node.Scalar() == name) {
        out = value;
        return;
      }
    error_at(node.Mark(), path, "expected one of " + choices + ", got '" + node.Scalar() + "'");
  } else if constexpr (std::is_same_v<T, bool>) {
    if (!scalar_or_error(node, path, "true or false", false))
      return;
    if (node.Scalar() == "true" || node.Scalar() == "false")
      out = node.Scalar() == "true";
    else
      error_at(node.Mark(), path, "expected true or false, got '" + node.Scalar() + "'");
  } else if constexpr (std::is_integral_v<T> && std::is_signed_v<T>) {
    long long v = 0;
    if (read_integer(node, path, static_cast<long long>(std::numeric_limits<T>::min()),
                     static_cast<unsigned long long>(std::numeric_limits<T>::max()), &v, nullptr))
      out = static_cast<T>(v);
  } else if constexpr (std::is_integral_v<T>) {
    unsigned long long v = 0;
    if (read_integer(node, path, 0, std::numeric_limits<T>::max(), nullptr, &v))
      out = static_cast<T>(v);
  } else if constexpr (std::is_floating_point_v<T>) {
    read_double(node, path, out);
  } else {
    static_assert(std::is_same_v<T, std::string>, "unsupported config field type");
    read_string(node, path, out);
  }
}

// --- printer ------------------------------------------------------------------------------

/// Writes config structs as YAML through a YAML::Emitter.
class printer {
public:
  explicit printer(YAML::Emitter& out) : out_(out) {}

  template <class T>
  void operator()(const char* key, T& value) {
    if constexpr (is_optional<T>::value) {
      if (!value)
        return;
      out_ << YAML::Key << key << YAML::Value;
      write(*value);
    } else {
      out_ << YAML::Key << key << YAML::Value;
      write(value);
    }
  }

  template <class T>
  void write(T& value) {
    if constexpr (has_fields<T>::value) {
      out_ << YAML::BeginMap;
      visit_fields(*this, value);
      out_ << YAML::EndMap;
    } else if constexpr (is_vector<T>::value) {
      if (!is_struct_vector<T>::value)
        out_ << YAML::Flow;
      out_ << YAML::BeginSeq;
      for (auto& x : value)
        write(x);
      out_ << YAML::EndSeq;
    } else if constexpr (has_enum_names<T>::value) {
      for (auto& [v, name] : enum_names(T{}))
        if (v == value)
          out_ << name;
    } else if constexpr (std::is_same_v<T, bool>) {
      out_ << (value ? "true" : "false");
    } else if constexpr (std::is_integral_v<T>) {
      out_ << std::to_string(value);
    } else if constexpr (std::is_floating_point_v<T>) {
      out_ << format_double(value);
    } else {
      out_ << YAML::DoubleQuoted << value;
    }
  }

private:
  YAML::Emitter& out_;
};

// --- key paths ----------------------------------------------------------------------------

/// Collects every key path of a struct: leaves ("training.lr") and lists of structs
/// ("hosts", then "hosts[].name").
struct key_collector {
  std::string prefix;
  std::vector<std::string>& out;

  template <class T>
  void operator()(const char* key, T& value) {
    collect(join_path(prefix, key), value);
  }

  template <class T>
  void collect(const std::string& path, T& value) {
    if constexpr (is_optional<T>::value) {
      typename T::value_type inner{};
      collect(path, inner);
    } else if constexpr (has_fields<T>::value) {
      key_collector sub{path, out};
      visit_fields(sub, value);
    } else if constexpr (is_struct_vector<T>::value) {
      out.push_back(path); // the list itself, then its items' keys
      typename T::value_type inner{};
      collect(path + "[]", inner);
    } else {
      out.push_back(path);
    }
  }
};

} // namespace gwtf::app::detail
