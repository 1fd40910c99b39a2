#include "model/block_store.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <stdexcept>
#include <vector>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

namespace gwtf::model {

namespace {

std::size_t page_size() {
  static const auto size = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  return size;
}

std::size_t round_up(std::size_t n) {
  auto p = page_size();
  return (n + p - 1) / p * p;
}

// Every live region of every store in the process, by its mapped address: advice goes only
// to those (MADV_DONTNEED on another tensor's private memory would zero it).
struct region_registry {
  std::mutex mtx;
  std::map<const void*, std::size_t> live; // address -> mapped length
};
region_registry& regions() {
  static region_registry r;
  return r;
}

// Advice for the region holding a stored tensor; nothing for any other tensor.
void advise(const torch::Tensor& t, int advice) {
  if (!t.defined() || t.numel() == 0)
    return;
  const void* p = t.storage().data();
  std::size_t length = 0;
  {
    auto& r = regions();
    std::lock_guard<std::mutex> guard{r.mtx};
    auto it = r.live.find(p);
    if (it == r.live.end())
      return; // not one of the stores' tensors
    length = it->second;
  }
  ::madvise(const_cast<void*>(p), length, advice);
}

} // namespace

struct block_store::file {
  int fd = -1;
  std::mutex mtx;
  std::int64_t end = 0;                           // file length
  std::int64_t in_use = 0;                        // bytes of live regions
  std::multimap<std::size_t, std::int64_t> free; // length -> offset of a freed region

  ~file() {
    if (fd >= 0)
      ::close(fd);
  }

  // A mapped region of `length` bytes (page multiple), zero-filled.
  std::pair<void*, std::int64_t> take(std::size_t length) {
    std::int64_t offset = -1;
    {
      std::lock_guard<std::mutex> guard{mtx};
      if (auto it = free.find(length); it != free.end()) {
        offset = it->second;
        free.erase(it);
      } else {
        offset = end;
        if (::ftruncate(fd, end + static_cast<std::int64_t>(length)) != 0)
          throw std::runtime_error(std::string{"block store: cannot grow its file: "} + std::strerror(errno));
        end += static_cast<std::int64_t>(length);
      }
      in_use += static_cast<std::int64_t>(length);
    }
    void* p = ::mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, offset);
    if (p == MAP_FAILED) {
      give(offset, length);
      throw std::runtime_error(std::string{"block store: cannot map its file: "} + std::strerror(errno));
    }
    auto& r = regions();
    std::lock_guard<std::mutex> guard{r.mtx};
    r.live[p] = length;
    return {p, offset};
  }

  // A region's pages are dropped (a reused region reads zeros) and it is free again.
  void give(std::int64_t offset, std::size_t length) {
    ::fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, offset, static_cast<off_t>(length));
    std::lock_guard<std::mutex> guard{mtx};
    free.emplace(length, offset);
    in_use -= static_cast<std::int64_t>(length);
  }
};

block_store::block_store(const std::string& dir) : file_(std::make_shared<file>()) {
  std::string path = (dir.empty() ? std::string{"."} : dir) + "/.gwtf-swap-XXXXXX";
  std::vector<char> name(path.begin(), path.end());
  name.push_back('\0');
  file_->fd = ::mkstemp(name.data());
  if (file_->fd < 0)
    throw std::runtime_error("block store: cannot create a swap file in " + dir + ": " + std::strerror(errno));
  ::unlink(name.data());
}

block_store::~block_store() = default;

torch::Tensor block_store::allocate(at::IntArrayRef sizes, torch::ScalarType type) {
  auto options = torch::TensorOptions().dtype(type);
  std::int64_t numel = 1;
  for (auto d : sizes)
    numel *= d;
  if (numel == 0)
    return torch::zeros(sizes, options);
  auto length = round_up(static_cast<std::size_t>(numel) * c10::elementSize(type));
  auto [p, offset] = file_->take(length);
  auto owner = file_;
  return torch::from_blob(
    p, sizes,
    [owner, offset = offset, length](void* q) {
      {
        auto& r = regions();
        std::lock_guard<std::mutex> guard{r.mtx};
        r.live.erase(q);
      }
      ::munmap(q, length);
      owner->give(offset, length);
    },
    options);
}

torch::Tensor block_store::adopt(const torch::Tensor& t) {
  torch::NoGradGuard no_grad;
  auto out = allocate(t.sizes(), t.scalar_type());
  populate(out, true); // every page is written next
  out.copy_(t);
  return out;
}

void block_store::prefetch(const torch::Tensor& t) {
  advise(t, MADV_WILLNEED);
}

void block_store::populate(const torch::Tensor& t, bool write) {
#if defined(MADV_POPULATE_READ) && defined(MADV_POPULATE_WRITE)
  advise(t, write ? MADV_POPULATE_WRITE : MADV_POPULATE_READ);
#else
  (void)t;
  (void)write;
#endif
}

void block_store::release(const torch::Tensor& t) {
  advise(t, MADV_DONTNEED);
}

std::int64_t block_store::bytes_in_use() const {
  std::lock_guard<std::mutex> guard{file_->mtx};
  return file_->in_use;
}

} // namespace gwtf::model
