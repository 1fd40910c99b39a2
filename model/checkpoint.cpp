#include "model/checkpoint.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <set>
#include <sys/stat.h>
#include <unistd.h>

#include "model/hash.hpp"

namespace gwtf::model {

namespace {

namespace fs = std::filesystem;

constexpr char magic[8] = {'G', 'W', 'T', 'F', 'C', 'K', 'P', 'T'};
constexpr std::size_t fixed_header = sizeof magic + 4 + 4 + 4 + 8 + 8 + 2; // before the host name

template <class T>
void put(std::vector<std::uint8_t>& out, T v) {
  auto at = out.size();
  out.resize(at + sizeof v);
  std::memcpy(out.data() + at, &v, sizeof v);
}

template <class T>
T get(const std::uint8_t* at) {
  T v;
  std::memcpy(&v, at, sizeof v);
  return v;
}

std::string errno_text() { return std::strerror(errno); }

// Writes all of `data` to `fd` (short writes and EINTR retried).
bool write_all(int fd, const std::uint8_t* data, std::size_t size) {
  while (size > 0) {
    auto n = ::write(fd, data, size);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return false;
    data += n;
    size -= static_cast<std::size_t>(n);
  }
  return true;
}

bool fsync_dir(const fs::path& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd < 0)
    return false;
  bool ok = ::fsync(fd) == 0;
  ::close(fd);
  return ok;
}

// "iteration-0000000012.ckpt" -> 12
std::optional<std::uint64_t> iteration_of(const std::string& name) {
  const std::string prefix = "iteration-", suffix = ".ckpt";
  if (name.size() <= prefix.size() + suffix.size() || name.rfind(prefix, 0) != 0
      || name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
    return std::nullopt;
  auto digits = name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
  if (digits.empty() || digits.size() > 19 || !std::all_of(digits.begin(), digits.end(), ::isdigit))
    return std::nullopt;
  return std::stoull(digits);
}

fs::path stage_dir(const std::string& root, std::uint32_t stage) {
  return fs::path{root} / ("stage-" + std::to_string(stage));
}

} // namespace

std::vector<std::uint8_t> encode_checkpoint(const checkpoint_meta& meta, const std::vector<std::uint8_t>& state) {
  std::vector<std::uint8_t> out;
  out.reserve(fixed_header + meta.host.size() + 8 + state.size() + 8);
  out.resize(sizeof magic);
  std::memcpy(out.data(), magic, sizeof magic);
  put<std::uint32_t>(out, checkpoint_version);
  put<std::uint32_t>(out, meta.stage);
  put<std::uint32_t>(out, meta.stages);
  put<std::uint64_t>(out, meta.iteration);
  put<std::uint64_t>(out, meta.config_hash);
  put<std::uint16_t>(out, static_cast<std::uint16_t>(std::min<std::size_t>(meta.host.size(), 0xffff)));
  out.insert(out.end(), meta.host.begin(), meta.host.begin() + std::min<std::size_t>(meta.host.size(), 0xffff));
  put<std::uint64_t>(out, state.size());
  out.insert(out.end(), state.begin(), state.end());
  put<std::uint64_t>(out, fast_hash(out.data(), out.size()));
  return out;
}

checked<checkpoint> decode_checkpoint(const std::uint8_t* data, std::size_t size) {
  if (data == nullptr || size < fixed_header + 8 + 8)
    return std::to_string(size) + " bytes is shorter than a checkpoint's header (truncated)";
  if (std::memcmp(data, magic, sizeof magic) != 0)
    return std::string{"not a caf-gwtf checkpoint (bad magic)"};
  auto version = get<std::uint32_t>(data + 8);
  if (version != checkpoint_version)
    return "format version " + std::to_string(version) + ", this build reads " + std::to_string(checkpoint_version);
  if (get<std::uint64_t>(data + size - 8) != fast_hash(data, size - 8))
    return std::string{"content hash mismatch (truncated or corrupted)"};
  checkpoint c;
  c.meta.stage = get<std::uint32_t>(data + 12);
  c.meta.stages = get<std::uint32_t>(data + 16);
  c.meta.iteration = get<std::uint64_t>(data + 20);
  c.meta.config_hash = get<std::uint64_t>(data + 28);
  auto host_len = get<std::uint16_t>(data + 36);
  std::size_t at = fixed_header;
  if (size - 8 < at + host_len + 8)
    return std::string{"host name runs past the end"};
  c.meta.host.assign(reinterpret_cast<const char*>(data + at), host_len);
  at += host_len;
  auto payload = get<std::uint64_t>(data + at);
  at += 8;
  if (payload != size - 8 - at)
    return "payload of " + std::to_string(payload) + " bytes, the file holds " + std::to_string(size - 8 - at);
  if (c.meta.stages == 0 || c.meta.stage >= c.meta.stages)
    return "stage " + std::to_string(c.meta.stage) + " of " + std::to_string(c.meta.stages) + " stages";
  c.state.assign(data + at, data + at + payload);
  return c;
}

checked<state_blob_info> describe_state_blob(const std::vector<std::uint8_t>& blob) {
  constexpr char state_magic[8] = {'G', 'W', 'T', 'F', 'S', 'T', 'G', 'E'};
  constexpr std::size_t header = 8 + 4 + 4 + 8 + 4;
  if (blob.size() < header + 8)
    return std::to_string(blob.size()) + " bytes: shorter than a stage state's header";
  if (std::memcmp(blob.data(), state_magic, 8) != 0)
    return std::string{"not a stage state (bad magic)"};
  if (get<std::uint64_t>(blob.data() + blob.size() - 8) != fast_hash(blob.data(), blob.size() - 8))
    return std::string{"stage state: content hash mismatch"};
  auto steps = get<std::int64_t>(blob.data() + 16);
  if (steps < 0)
    return std::string{"stage state: negative step count"};
  // Version 3 ends in a pending-step flag before the hash (training.averaging overlap): such a
  // state resumes at the iteration after its pending step.
  auto version = get<std::uint32_t>(blob.data() + 8);
  std::uint64_t pending = version >= 3 && blob[blob.size() - 9] == 1 ? 1 : 0;
  return state_blob_info{get<std::uint32_t>(blob.data() + 12), static_cast<std::uint64_t>(steps) + pending};
}

std::string checkpoint_path(const std::string& root, std::uint32_t stage, std::uint64_t iteration) {
  char name[40];
  std::snprintf(name, sizeof name, "iteration-%010llu.ckpt", static_cast<unsigned long long>(iteration));
  return (stage_dir(root, stage) / name).string();
}

std::string write_checkpoint(const std::string& root, const checkpoint_meta& meta,
                             const std::vector<std::uint8_t>& state, int keep) {
  auto dir = stage_dir(root, meta.stage);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec)
    return "cannot create " + dir.string() + ": " + ec.message();
  auto final_path = fs::path{checkpoint_path(root, meta.stage, meta.iteration)};
  auto tmp = final_path;
  tmp += ".tmp." + std::to_string(::getpid());
  auto bytes = encode_checkpoint(meta, state);
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    return "cannot create " + tmp.string() + ": " + errno_text();
  bool ok = write_all(fd, bytes.data(), bytes.size());
  auto why = ok ? std::string{} : "cannot write " + tmp.string() + ": " + errno_text();
  if (ok && ::fsync(fd) != 0) {
    ok = false;
    why = "cannot fsync " + tmp.string() + ": " + errno_text();
  }
  ::close(fd);
  if (ok && ::rename(tmp.c_str(), final_path.c_str()) != 0) {
    ok = false;
    why = "cannot rename " + tmp.string() + " to " + final_path.string() + ": " + errno_text();
  }
  if (!ok) {
    fs::remove(tmp, ec);
    return why;
  }
  if (!fsync_dir(dir))
    return "cannot fsync the directory " + dir.string() + ": " + errno_text();
  // Keep the newest `keep`; remove what killed writers left.
  auto its = checkpoint_iterations(root, meta.stage);
  std::set<std::uint64_t> kept;
  for (auto it = its.rbegin(); it != its.rend() && static_cast<int>(kept.size()) < std::max(keep, 1); ++it)
    kept.insert(*it);
  for (auto& e : fs::directory_iterator(dir, ec)) {
    auto name = e.path().filename().string();
    auto i = iteration_of(name);
    if ((i && kept.count(*i) == 0) || (!i && name.find(".ckpt.tmp.") != std::string::npos))
      fs::remove(e.path(), ec);
  }
  return {};
}

std::vector<std::uint64_t> checkpoint_iterations(const std::string& root, std::uint32_t stage) {
  std::vector<std::uint64_t> out;
  std::error_code ec;
  for (auto& e : fs::directory_iterator(stage_dir(root, stage), ec))
    if (auto i = iteration_of(e.path().filename().string()); i && e.is_regular_file(ec))
      out.push_back(*i);
  std::sort(out.begin(), out.end());
  return out;
}

checked<checkpoint> read_checkpoint(const std::string& path, std::uint32_t stage, std::uint64_t config_hash) {
  std::ifstream f{path, std::ios::binary | std::ios::ate};
  if (!f)
    return path + ": cannot open";
  auto size = static_cast<std::size_t>(f.tellg());
  std::vector<std::uint8_t> bytes(size);
  f.seekg(0);
  if (!f.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(size)))
    return path + ": cannot read " + std::to_string(size) + " bytes";
  auto c = decode_checkpoint(bytes.data(), bytes.size());
  if (auto* e = std::get_if<std::string>(&c))
    return path + ": " + *e;
  auto& cp = std::get<checkpoint>(c);
  if (cp.meta.stage != stage)
    return path + ": holds stage " + std::to_string(cp.meta.stage) + ", expected stage " + std::to_string(stage);
  if (cp.meta.config_hash != config_hash) {
    char text[96];
    std::snprintf(text, sizeof text, ": written for config %016llx, this cluster is %016llx",
                  static_cast<unsigned long long>(cp.meta.config_hash), static_cast<unsigned long long>(config_hash));
    return path + text + " (model, seed, data or schedule changed)";
  }
  if (iteration_of(fs::path{path}.filename().string()).value_or(cp.meta.iteration) != cp.meta.iteration)
    return path + ": its name says another iteration than its content (" + std::to_string(cp.meta.iteration) + ")";
  return c;
}

checked<checkpoint> load_checkpoint(const std::string& root, std::uint32_t stage, std::uint64_t config_hash,
                                    std::optional<std::uint64_t> at, std::vector<std::string>& skipped) {
  auto its = checkpoint_iterations(root, stage);
  if (at) {
    if (std::find(its.begin(), its.end(), *at) == its.end())
      return "no checkpoint of stage " + std::to_string(stage) + " at iteration " + std::to_string(*at) + " under "
             + root;
    return read_checkpoint(checkpoint_path(root, stage, *at), stage, config_hash);
  }
  for (auto it = its.rbegin(); it != its.rend(); ++it) {
    auto c = read_checkpoint(checkpoint_path(root, stage, *it), stage, config_hash);
    if (std::holds_alternative<checkpoint>(c))
      return c;
    skipped.push_back(std::get<std::string>(c) + "; trying an older one");
  }
  return "no usable checkpoint of stage " + std::to_string(stage) + " under " + root
         + (its.empty() ? " (none written)" : " (" + std::to_string(its.size()) + " rejected)");
}

std::optional<std::uint64_t> consistent_cut(const std::vector<std::vector<std::uint64_t>>& per_stage) {
  if (per_stage.empty())
    return std::nullopt;
  std::set<std::uint64_t> common{per_stage.front().begin(), per_stage.front().end()};
  for (std::size_t s = 1; s < per_stage.size(); ++s) {
    std::set<std::uint64_t> next;
    for (auto i : per_stage[s])
      if (common.count(i))
        next.insert(i);
    common = std::move(next);
  }
  if (common.empty())
    return std::nullopt;
  return *common.rbegin();
}

} // namespace gwtf::model
