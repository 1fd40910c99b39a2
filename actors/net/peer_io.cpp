#include "actors/net/peer_io.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <mutex>
#include <thread>
#include <unordered_map>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "actors/net/peer_framing.hpp"

namespace gwtf::actors {

namespace {

using clock_type = std::chrono::steady_clock;

constexpr std::uint64_t wake_key = 0;                               // the eventfd
constexpr std::uint64_t listen_key = ~std::uint64_t{0};             // the listening socket
constexpr std::size_t tls_read_bytes = 256 * 1024;                  // one read of TLS records
constexpr std::size_t read_budget = 512 * 1024;  // bytes read from one connection per turn
constexpr std::size_t write_budget = 1u << 20;   // bytes written to one connection per turn
constexpr std::size_t max_iov = 64;
constexpr std::size_t small_piece = 4096; // TLS: pieces below this share a record (headers)

std::string errno_text(int e) { return std::strerror(e); }

void tune(int fd, std::size_t send_window) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  int lowat = static_cast<int>(send_window);
  ::setsockopt(fd, IPPROTO_TCP, TCP_NOTSENT_LOWAT, &lowat, sizeof(lowat));
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
}

std::string peer_address(const sockaddr_storage& a) {
  char host[INET6_ADDRSTRLEN] = "?";
  std::uint16_t port = 0;
  if (a.ss_family == AF_INET) {
    auto* v4 = reinterpret_cast<const sockaddr_in*>(&a);
    ::inet_ntop(AF_INET, &v4->sin_addr, host, sizeof host);
    port = ntohs(v4->sin_port);
  } else if (a.ss_family == AF_INET6) {
    auto* v6 = reinterpret_cast<const sockaddr_in6*>(&a);
    ::inet_ntop(AF_INET6, &v6->sin6_addr, host, sizeof host);
    port = ntohs(v6->sin6_port);
  }
  return std::string{host} + ":" + std::to_string(port);
}

struct command {
  enum kind { send, adopt } what = send;
  std::uint64_t id = 0; // connection (send) or serial (adopt)
  std::int32_t service = 0;
  bool introduction = false;
  bool behind_bulk = false;
  std::vector<std::uint8_t> bytes;
  int fd = -1;
  std::string address;
};

// Decrypted bytes go straight into the frame reader's space: a payload into its frame.
struct reader_sink final : tls_session::plain_sink {
  reader_sink(frame_reader& r, std::vector<inbound_frame>& f) : reader(r), frames(f) {}
  frame_reader& reader;
  std::vector<inbound_frame>& frames;
  std::string why;
  std::pair<std::uint8_t*, std::size_t> space() override { return reader.space(); }
  bool wrote(std::size_t n) override {
    if (n > 0)
      why = reader.wrote(n, frames);
    return why.empty();
  }
};

struct connection {
  std::uint64_t id = 0;
  int fd = -1;
  std::string address;
  bool dialled = false;
  std::uint64_t serial = 0;  // of the dial waiting for the peer's hello; 0: none
  frame_reader reader;
  frame_writer writer;
  std::unique_ptr<tls_session> tls;
  std::vector<std::uint8_t> raw; // bytes that go before any fragment: the hello, TLS records
  std::size_t raw_sent = 0;
  bool hello_sent = false;         // (with TLS: held by the session until its handshake completes)
  bool want_out = false;           // EPOLLOUT armed
  std::size_t buffered = 0;        // the reader's unfinished frames, as last counted
  explicit connection(std::uint64_t max_frame) : reader(max_frame) {}
  bool ready() const { return !tls || tls->established(); } // frames may be written
};

} // namespace

struct peer_io::loop {
  peer_io_options opts;
  peer_io_events ev;
  int ep = -1, wake = -1, listener = -1;
  std::mutex mtx;
  std::vector<command> queue;
  bool stopping = false;
  std::thread thread;
  std::unordered_map<std::uint64_t, std::unique_ptr<connection>> conns;
  std::uint64_t next_id = 0;
  std::unique_ptr<port_guard> guard; // caps, handshake and idle deadlines (actors/net/port_guard)
  refusal_log said;                  // refusal lines, rate-limited per source and kind
  std::uint64_t buffered_total = 0;  // unfinished frames' bytes of every connection
  clock_type::time_point now = clock_type::now(); // of this turn of the loop
  clock_type::time_point next_scan = now;         // for expired deadlines
  // The soonest deadline as of the last scan, made sooner by connections added since (an
  // activity only moves deadlines later: waking early just scans again). Kept here so that a
  // turn of the loop does not look at every connection.
  std::optional<clock_type::time_point> due;
  std::vector<std::uint8_t> in;      // TLS records read
  std::vector<std::uint8_t> scratch; // fragments to encrypt
  std::vector<inbound_frame> frames;

  ~loop() {
    for (auto& [id, c] : conns)
      ::close(c->fd);
    for (auto& cmd : queue) // sockets handed over after the loop stopped
      if (cmd.what == command::adopt)
        ::close(cmd.fd);
    for (int fd : {listener, wake, ep})
      if (fd >= 0)
        ::close(fd);
  }

  void post(command c) {
    {
      std::lock_guard<std::mutex> guard{mtx};
      queue.push_back(std::move(c));
    }
    std::uint64_t one = 1;
    [[maybe_unused]] auto n = ::write(wake, &one, sizeof one);
  }

  void arm(connection& c, bool out) {
    if (c.want_out == out)
      return;
    c.want_out = out;
    epoll_event e{};
    e.events = EPOLLIN | (out ? EPOLLOUT : 0u);
    e.data.u64 = c.id;
    ::epoll_ctl(ep, EPOLL_CTL_MOD, c.fd, &e);
  }

  // `id`: admitted by the guard (accepted), else a dialled connection.
  connection& add(int fd, std::string address, std::uint64_t id = 0) {
    tune(fd, opts.send_window);
    auto c = std::make_unique<connection>(opts.max_frame);
    c->id = id != 0 ? id : ++next_id;
    c->fd = fd;
    c->address = std::move(address);
    c->dialled = id == 0;
    if (c->dialled)
      guard->dialled(c->id, now);
    auto deadline = now + std::chrono::milliseconds(opts.handshake_timeout_ms);
    due = due ? std::min(*due, deadline) : deadline;
    epoll_event e{};
    e.events = EPOLLIN;
    e.data.u64 = c->id;
    ::epoll_ctl(ep, EPOLL_CTL_ADD, fd, &e);
    auto& ref = *c;
    conns.emplace(c->id, std::move(c));
    return ref;
  }

  void close_connection(std::uint64_t id, const std::string& why) {
    auto it = conns.find(id);
    if (it == conns.end())
      return;
    auto c = std::move(it->second);
    conns.erase(it);
    guard->left(id);
    buffered_total -= c->buffered;
    if (c->serial != 0)
      ev.dialled(c->serial, 0, c->address + ": " + why);
    else if (c->reader.greeted())
      ev.closed(c->id, why);
    ::epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, nullptr);
    ::close(c->fd);
  }

  // One line per source and kind of refusal and window (actors/net/port_guard.hpp).
  void say(const std::string& address, const std::string& why, const std::string& what) {
    if (auto line = said.refuse(address, why, opts.port_name + ": " + what + ": " + why, now))
      ev.refused(*line);
  }

  void refuse(connection& c, const std::string& why) {
    say(c.address, why, std::string{"closed the connection "} + (c.dialled ? "to " : "from ") + c.address);
    close_connection(c.id, why);
  }

  // After bytes went into `c`'s reader: the host's budget for unfinished frames. Above it the
  // connection holding the most is closed. False if that was `c`.
  bool within_budget(connection& c) {
    auto b = c.reader.buffered();
    buffered_total = buffered_total - c.buffered + b;
    c.buffered = b;
    bool kept = true;
    while (buffered_total > opts.max_partial_bytes) {
      connection* most = nullptr;
      for (auto& [id, x] : conns)
        if (most == nullptr || x->buffered > most->buffered)
          most = x.get();
      if (most == nullptr || most->buffered == 0)
        break;
      kept = kept && most != &c;
      refuse(*most, "its unfinished frames hold " + std::to_string(most->buffered) + " bytes, and this host's "
                      + std::to_string(opts.max_partial_bytes)
                      + " for unfinished frames of all connections (node.max_partial_bytes) are spent");
    }
    return kept;
  }

  // This end's hello (through TLS once its handshake completed).
  bool greet(connection& c) {
    if (c.hello_sent)
      return true;
    c.hello_sent = true;
    auto hello = peer_framing::hello_bytes();
    if (!c.tls) {
      c.raw.insert(c.raw.end(), hello.begin(), hello.end());
      return true;
    }
    return c.tls->to_peer(hello.data(), hello.size(), c.raw);
  }

  // A failed write: a full socket waits for EPOLLOUT (true), anything else closes it (false).
  bool socket_full(connection& c) {
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      arm(c, true);
      return true;
    }
    close_connection(c.id, errno_text(errno));
    return false;
  }

  // Writes what the connection has, raw bytes first, at most `write_budget` this turn; false
  // if it was closed.
  bool flush(connection& c) {
    std::size_t written = 0;
    guard->active(c.id, now); // (a connection this host writes to is not idle)
    while (written < write_budget) {
      if (c.raw_sent < c.raw.size()) {
        auto n = ::send(c.fd, c.raw.data() + c.raw_sent, c.raw.size() - c.raw_sent, MSG_NOSIGNAL);
        if (n < 0) {
          if (errno == EINTR)
            continue;
          return socket_full(c);
        }
        c.raw_sent += static_cast<std::size_t>(n);
        written += static_cast<std::size_t>(n);
        if (c.raw_sent == c.raw.size()) {
          c.raw.clear();
          c.raw_sent = 0;
        }
        continue;
      }
      if (!c.ready() || c.writer.empty()) {
        arm(c, false);
        return true;
      }
      iovec iov[max_iov];
      if (c.tls) { // the pieces of one window encrypted from where they lie; headers gathered
        auto n = c.writer.gather(iov, max_iov, opts.send_window);
        std::size_t taken = 0;
        scratch.clear();
        bool ok = true;
        for (std::size_t i = 0; i < n && ok; ++i) {
          auto* p = static_cast<const std::uint8_t*>(iov[i].iov_base);
          taken += iov[i].iov_len;
          if (iov[i].iov_len < small_piece) {
            scratch.insert(scratch.end(), p, p + iov[i].iov_len);
            continue;
          }
          ok = (scratch.empty() || c.tls->to_peer(scratch.data(), scratch.size(), c.raw))
               && c.tls->to_peer(p, iov[i].iov_len, c.raw);
          scratch.clear();
        }
        ok = ok && (scratch.empty() || c.tls->to_peer(scratch.data(), scratch.size(), c.raw));
        c.writer.consumed(taken);
        if (!ok) {
          flush_raw_once(c);
          refuse(c, c.tls->error());
          return false;
        }
        continue;
      }
      auto n = c.writer.gather(iov, max_iov, write_budget - written);
      msghdr m{};
      m.msg_iov = iov;
      m.msg_iovlen = n;
      auto k = ::sendmsg(c.fd, &m, MSG_NOSIGNAL);
      if (k < 0) {
        if (errno == EINTR)
          continue;
        return socket_full(c);
      }
      c.writer.consumed(static_cast<std::size_t>(k));
      written += static_cast<std::size_t>(k);
      std::size_t asked = 0;
      for (std::size_t i = 0; i < n; ++i)
        asked += iov[i].iov_len;
      if (static_cast<std::size_t>(k) < asked) { // the socket is full
        arm(c, true);
        return true;
      }
    }
    arm(c, true); // more next turn, after the other connections
    return true;
  }

  // A failing TLS session's last records (its alert says why), best effort.
  void flush_raw_once(connection& c) {
    if (c.raw_sent < c.raw.size())
      [[maybe_unused]] auto n = ::send(c.fd, c.raw.data() + c.raw_sent, c.raw.size() - c.raw_sent, MSG_NOSIGNAL | MSG_DONTWAIT);
  }

  // The handshake completed: the peer's certificate must name a host (a shell's names none).
  // Why not, or empty.
  static std::string identity_problem(const connection& c) {
    auto who = c.tls->peer_identity();
    if (!who.hosts.empty())
      return {};
    return "its certificate names " + who.describe() + ": only a host certificate may join "
           "(SAN URI caf-gwtf:host/NAME, scripts/make-certs)";
  }

  // The link is told which hosts the certificate names before the connection's first frame;
  // a certificate that names none is refused. False if refused.
  bool certified(connection& c) {
    if (auto why = identity_problem(c); !why.empty()) {
      refuse(c, why);
      return false;
    }
    if (ev.certified)
      ev.certified(c.id, c.tls->peer_identity().hosts);
    return true;
  }

  // Hands out the frames read; answers a dial on the peer's hello. False if closed.
  bool after_read(connection& c, bool was_greeted, const std::string& why) {
    guard->active(c.id, now);
    if (!was_greeted && c.reader.greeted()) {
      guard->handshaken(c.id);
      if (c.serial != 0) {
        auto serial = c.serial;
        c.serial = 0;
        ev.dialled(serial, c.id, {});
      }
    }
    for (auto& f : frames)
      ev.frame(c.id, f.service, f.introduction, std::move(f.bytes));
    frames.clear();
    if (!why.empty()) {
      refuse(c, why);
      return false;
    }
    return within_budget(c);
  }

  // What a read's result means: bytes to take, a retry, nothing more for now, or the end (the
  // connection is closed then).
  enum class got { bytes, retry, drained, closed };
  got read_result(connection& c, ssize_t n) {
    if (n > 0)
      return got::bytes;
    if (n == 0) {
      close_connection(c.id, "closed by the peer");
      return got::closed;
    }
    if (errno == EINTR)
      return got::retry;
    if (errno == EAGAIN || errno == EWOULDBLOCK)
      return got::drained;
    close_connection(c.id, errno_text(errno));
    return got::closed;
  }

  // Reads what the connection has, at most `read_budget` this turn; false if it was closed.
  bool read_plain(connection& c) {
    std::size_t got = 0;
    while (got < read_budget) {
      auto [at, want] = c.reader.space();
      if (want == 0)
        return true;
      iovec iov[2] = {{at, want}, {nullptr, 0}};
      std::uint8_t next_header[peer_framing::header_bytes];
      int parts = 1;
      if (c.reader.in_payload()) { // the payload's rest and the next header in one call
        iov[1] = {next_header, sizeof next_header};
        parts = 2;
      }
      auto n = ::readv(c.fd, iov, parts);
      auto r = read_result(c, n);
      if (r == got::retry)
        continue;
      if (r != got::bytes)
        return r == got::drained;
      auto k = static_cast<std::size_t>(n);
      got += k;
      bool greeted = c.reader.greeted();
      auto why = c.reader.wrote(std::min(k, want), frames);
      if (why.empty() && k > want)
        why = c.reader.feed(next_header, k - want, frames);
      if (!after_read(c, greeted, why))
        return false;
      if (k < want + iov[1].iov_len)
        return true; // drained
    }
    return true;
  }

  bool read_tls(connection& c) {
    std::size_t got = 0;
    in.resize(tls_read_bytes);
    while (got < read_budget) {
      auto n = ::read(c.fd, in.data(), in.size());
      auto r = read_result(c, n);
      if (r == got::retry)
        continue;
      if (r != got::bytes)
        return r == got::drained;
      got += static_cast<std::size_t>(n);
      bool was = c.tls->established();
      bool greeted = c.reader.greeted();
      reader_sink sink{c.reader, frames};
      bool ok = c.tls->from_network(in.data(), static_cast<std::size_t>(n), sink, c.raw);
      if (!ok) {
        flush_raw_once(c);
        // A peer may complete its handshake and close in one read (a shell's certificate
        // tried on the peer port, then closed): the refusal names the certificate then.
        auto why = !was && c.tls->established() ? identity_problem(c) : std::string{};
        refuse(c, why.empty() ? c.tls->error() : why);
        return false;
      }
      if (!was && c.tls->established() && !certified(c))
        return false;
      if (!was && c.tls->established() && !greet(c)) {
        flush_raw_once(c);
        refuse(c, c.tls->error());
        return false;
      }
      if (!after_read(c, greeted, sink.why))
        return false;
      if (!c.raw.empty() || (c.ready() && !c.writer.empty()))
        if (!flush(c))
          return false;
      if (static_cast<std::size_t>(n) < in.size())
        return true;
    }
    return true;
  }

  void accept_some() {
    for (int i = 0; i < 16; ++i) {
      sockaddr_storage a{};
      socklen_t len = sizeof a;
      int fd = ::accept4(listener, reinterpret_cast<sockaddr*>(&a), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0)
        return;
      auto address = peer_address(a);
      auto id = ++next_id;
      auto admitted = guard->arrive(id, source_address(address), now);
      for (auto old : admitted.evicted)
        if (auto it = conns.find(old); it != conns.end())
          refuse(*it->second, "idle while the port was full: made room for " + address);
      if (!admitted.admitted) {
        say(address, admitted.why, "refused the connection from " + address);
        ::close(fd);
        continue;
      }
      auto& c = add(fd, std::move(address), id);
      if (opts.tls) {
        c.tls = std::make_unique<tls_session>(opts.tls); // greets once the handshake completes
      } else {
        greet(c);
        flush(c);
      }
    }
  }

  // Runs what other threads posted; false once the loop is to stop. The eventfd is read
  // before the flag is looked at under the lock: a stop whose wake-up this read consumed set
  // the flag before it, and a later one wakes the loop again.
  bool run_commands() {
    std::uint64_t count = 0;
    [[maybe_unused]] auto r = ::read(wake, &count, sizeof count);
    std::vector<command> batch;
    {
      std::lock_guard<std::mutex> guard{mtx};
      if (stopping)
        return false;
      batch.swap(queue);
    }
    for (auto& cmd : batch) {
      if (cmd.what == command::adopt) {
        auto& c = add(cmd.fd, std::move(cmd.address));
        c.serial = cmd.id;
        if (opts.tls_client) {
          c.tls = std::make_unique<tls_session>(opts.tls_client);
          if (!c.tls->start(c.raw)) {
            refuse(c, c.tls->error());
            continue;
          }
        }
        if (!greet(c)) { // with TLS: held until the handshake completes
          refuse(c, c.tls->error());
          continue;
        }
        flush(c);
        continue;
      }
      auto it = conns.find(cmd.id);
      if (it == conns.end())
        continue; // closed meanwhile: lost, as on a real network
      auto& c = *it->second;
      c.writer.push(cmd.service, cmd.introduction, std::move(cmd.bytes), cmd.behind_bulk);
      if (!c.want_out) // else the socket is full: epoll says when it is not
        flush(c);
    }
    return true;
  }

  int next_timeout_ms() {
    if (!due)
      return -1;
    auto at = std::max(*due, next_scan);
    auto t = clock_type::now();
    if (at <= t)
      return 0;
    return static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(at - t).count()) + 1;
  }

  // Handshake and idle deadlines: every connection is looked at once the soonest one passed,
  // every 50 ms at most.
  void expire() {
    if (!due || now < *due || now < next_scan)
      return;
    next_scan = now + std::chrono::milliseconds(50);
    auto lapsed = guard->expired(now);
    due = guard->next_deadline();
    for (auto& [id, lapse] : lapsed) {
      auto it = conns.find(id);
      if (it == conns.end())
        continue;
      auto& c = *it->second;
      if (lapse == port_guard::lapse::idle)
        refuse(c, describe(lapse, guard->limits()));
      else if (c.tls && !c.tls->established())
        refuse(c, "no TLS handshake within " + std::to_string(opts.handshake_timeout_ms) + " ms");
      else
        refuse(c, "no hello within " + std::to_string(opts.handshake_timeout_ms) + " ms");
    }
  }

  void run() {
    epoll_event events[64];
    while (true) {
      int n = ::epoll_wait(ep, events, 64, next_timeout_ms());
      if (n < 0 && errno != EINTR)
        return;
      now = clock_type::now();
      for (int i = 0; i < n; ++i) {
        auto key = events[i].data.u64;
        if (key == wake_key) {
          if (!run_commands())
            return;
          continue;
        }
        if (key == listen_key) {
          accept_some();
          continue;
        }
        auto it = conns.find(key);
        if (it == conns.end())
          continue; // closed earlier in this turn
        auto& c = *it->second;
        if ((events[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) != 0)
          if (!(c.tls ? read_tls(c) : read_plain(c)))
            continue;
        if ((events[i].events & EPOLLOUT) != 0)
          flush(c);
      }
      expire();
    }
  }
};

std::unique_ptr<peer_io> peer_io::start(peer_io_options opts, peer_io_events events, std::string& why) {
  auto l = std::make_unique<loop>();
  l->opts = std::move(opts);
  l->ev = std::move(events);
  auto limits = l->opts.limits;
  limits.handshake_timeout = std::chrono::milliseconds(l->opts.handshake_timeout_ms);
  l->guard = std::make_unique<port_guard>(limits);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  auto& host = l->opts.host;
  auto port_text = std::to_string(l->opts.port);
  if (int rc = ::getaddrinfo(host.empty() ? nullptr : host.c_str(), port_text.c_str(), &hints, &found); rc != 0) {
    why = "cannot resolve '" + host + "': " + ::gai_strerror(rc);
    return nullptr;
  }
  why = "no address for '" + host + "'";
  for (auto* a = found; a != nullptr && l->listener < 0; a = a->ai_next) {
    int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      why = "socket: " + errno_text(errno);
      continue;
    }
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd, a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd, SOMAXCONN) != 0) {
      why = "cannot listen on " + host + ":" + port_text + ": " + errno_text(errno);
      ::close(fd);
      continue;
    }
    l->listener = fd;
  }
  ::freeaddrinfo(found);
  if (l->listener < 0)
    return nullptr;
  sockaddr_storage bound{};
  socklen_t len = sizeof bound;
  ::getsockname(l->listener, reinterpret_cast<sockaddr*>(&bound), &len);
  auto port = bound.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
                                          : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  l->ep = ::epoll_create1(EPOLL_CLOEXEC);
  l->wake = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (l->ep < 0 || l->wake < 0) {
    why = "epoll: " + errno_text(errno);
    return nullptr;
  }
  epoll_event e{};
  e.events = EPOLLIN;
  e.data.u64 = wake_key;
  ::epoll_ctl(l->ep, EPOLL_CTL_ADD, l->wake, &e);
  e.data.u64 = listen_key;
  ::epoll_ctl(l->ep, EPOLL_CTL_ADD, l->listener, &e);
  why.clear();
  std::unique_ptr<peer_io> io{new peer_io(port)};
  auto* raw = l.get();
  l->thread = std::thread([raw] {
    ::pthread_setname_np(::pthread_self(), "gwtf.peer-io"); // for top and perf
    raw->run();
  });
  io->loop_ = std::move(l);
  return io;
}

peer_io::peer_io(std::uint16_t port) : port_(port) {}

peer_io::~peer_io() {
  if (!loop_)
    return;
  {
    std::lock_guard<std::mutex> guard{loop_->mtx};
    loop_->stopping = true;
  }
  std::uint64_t one = 1;
  [[maybe_unused]] auto n = ::write(loop_->wake, &one, sizeof one);
  if (loop_->thread.joinable())
    loop_->thread.join();
}

void peer_io::adopt(std::uint64_t serial, int fd, std::string address) {
  command c;
  c.what = command::adopt;
  c.id = serial;
  c.fd = fd;
  c.address = std::move(address);
  loop_->post(std::move(c));
}

void peer_io::send(std::uint64_t conn, std::int32_t service, bool introduction, std::vector<std::uint8_t> bytes,
                   bool behind_bulk) {
  command c;
  c.id = conn;
  c.service = service;
  c.introduction = introduction;
  c.behind_bulk = behind_bulk;
  c.bytes = std::move(bytes);
  loop_->post(std::move(c));
}

} // namespace gwtf::actors
