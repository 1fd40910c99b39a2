#include "model/data.hpp"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace gwtf::model {

struct corpus::mapping {
  const std::uint8_t* data = nullptr;
  std::size_t bytes = 0;

  ~mapping() {
    if (data != nullptr)
      munmap(const_cast<std::uint8_t*>(data), bytes);
  }
};

std::variant<corpus, std::string> corpus::open(const data_config& cfg, int vocab, int seq_len) {
  int fd = ::open(cfg.path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return cfg.path + ": cannot open: " + std::strerror(errno);
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return cfg.path + ": not a regular file";
  }
  auto bytes = static_cast<std::size_t>(st.st_size);
  std::size_t width = cfg.format == data_format::tokens ? 2 : 1;
  if (bytes % width != 0) {
    ::close(fd);
    return cfg.path + ": " + std::to_string(bytes)
           + " bytes is not a whole number of uint16 tokens";
  }
  std::size_t tokens = bytes / width;
  if (tokens < static_cast<std::size_t>(seq_len) + 2) {
    ::close(fd);
    return cfg.path + ": " + std::to_string(tokens) + " tokens, need at least seq_len + 2 = "
           + std::to_string(seq_len + 2);
  }
  void* p = mmap(nullptr, bytes, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED)
    return cfg.path + ": mmap failed: " + std::strerror(errno);
  auto map = std::make_shared<mapping>();
  map->data = static_cast<const std::uint8_t*>(p);
  map->bytes = bytes;
  corpus out;
  out.map_ = std::move(map);
  out.format_ = cfg.format;
  out.size_ = tokens;
  // Every id must index the embedding: check once here instead of on every sample.
  for (std::size_t i = 0; i < tokens; ++i)
    if (out.at(i) >= vocab)
      return cfg.path + ": token " + std::to_string(out.at(i)) + " at position "
             + std::to_string(i) + " is not below model.vocab = " + std::to_string(vocab);
  return out;
}

std::int32_t corpus::at(std::size_t i) const {
  const std::uint8_t* d = map_->data;
  if (format_ == data_format::text)
    return d[i];
  return static_cast<std::int32_t>(d[2 * i] | (d[2 * i + 1] << 8)); // little-endian uint16
}

std::uint64_t mix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

microbatch_tokens sample(const corpus& data, std::uint64_t seed, const microbatch_id& id,
                         int microbatch_size, int seq_len) {
  microbatch_tokens out;
  out.rows = microbatch_size;
  out.cols = seq_len + 1;
  out.tokens.resize(static_cast<std::size_t>(out.rows) * static_cast<std::size_t>(out.cols));
  std::size_t starts = data.size() - static_cast<std::size_t>(out.cols) + 1;
  std::uint64_t base = mix64(mix64(seed) ^ mix64(id.key()));
  for (int r = 0; r < out.rows; ++r) {
    std::size_t start = mix64(base + static_cast<std::uint64_t>(r)) % starts;
    for (int c = 0; c < out.cols; ++c)
      out.tokens[static_cast<std::size_t>(r * out.cols + c)] =
        data.at(start + static_cast<std::size_t>(c));
  }
  return out;
}

} // namespace gwtf::model
