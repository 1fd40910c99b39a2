#include "app/tools/shell.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <iomanip>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <vector>

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <editline/readline.h>
#include <nlohmann/json.hpp>

#include "actors/inspect/inspect_view.hpp"
#include "actors/node_config.hpp"
#include "actors/net/tls_session.hpp"
#include "messages/codec.hpp"

namespace gwtf::app {

using json = nlohmann::ordered_json;

namespace {

constexpr std::size_t max_reply_bytes = 16u << 20;

std::string scalar(const json& v) {
  if (v.is_string())
    return v.get<std::string>();
  if (v.is_number_float()) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.4g", v.get<double>());
    return buf;
  }
  if (v.is_null())
    return "-";
  return v.dump();
}

std::string table(const json& rows) {
  std::vector<std::string> cols;
  for (auto& r : rows)
    if (r.is_object())
      for (auto& [k, v] : r.items())
        if (std::find(cols.begin(), cols.end(), k) == cols.end())
          cols.push_back(k);
  std::vector<std::vector<std::string>> cells;
  std::vector<std::size_t> width;
  for (auto& c : cols)
    width.push_back(c.size());
  for (auto& r : rows) {
    std::vector<std::string> line;
    for (std::size_t i = 0; i < cols.size(); ++i) {
      auto s = r.is_object() && r.contains(cols[i]) ? scalar(r[cols[i]]) : std::string{"-"};
      width[i] = std::max(width[i], s.size());
      line.push_back(std::move(s));
    }
    cells.push_back(std::move(line));
  }
  std::ostringstream out;
  auto row = [&](const std::vector<std::string>& v) {
    for (std::size_t i = 0; i < v.size(); ++i)
      out << (i ? "  " : "  ") << v[i] << std::string(i + 1 < v.size() ? width[i] - v[i].size() : 0, ' ');
    out << "\n";
  };
  row(cols);
  for (auto& l : cells)
    row(l);
  return out.str();
}

// A connected TCP socket to host:port within the deadline, or why not.
struct connection {
  int fd = -1;
  ~connection() {
    if (fd >= 0)
      ::close(fd);
  }
};

using deadline = std::chrono::steady_clock::time_point;

int remaining_ms(deadline d) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(d - std::chrono::steady_clock::now()).count();
  return left > 0 ? static_cast<int>(left) : 0;
}

std::optional<std::string> dial(const actors::endpoint& ep, deadline until, connection& c) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  auto port = std::to_string(ep.port);
  if (int rc = ::getaddrinfo(ep.host.c_str(), port.c_str(), &hints, &res); rc != 0)
    return std::string{"cannot resolve "} + ep.host + ": " + ::gai_strerror(rc);
  std::string why = "no address";
  for (auto* a = res; a != nullptr; a = a->ai_next) {
    int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0)
      continue;
    if (::connect(fd, a->ai_addr, a->ai_addrlen) != 0 && errno != EINPROGRESS) {
      why = std::strerror(errno);
      ::close(fd);
      continue;
    }
    pollfd p{fd, POLLOUT, 0};
    int r = ::poll(&p, 1, remaining_ms(until));
    int err = 0;
    socklen_t len = sizeof err;
    if (r == 1 && ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0) {
      ::freeaddrinfo(res);
      c.fd = fd;
      return std::nullopt;
    }
    why = r == 0 ? "no connection within the timeout" : std::strerror(err != 0 ? err : errno);
    ::close(fd);
  }
  ::freeaddrinfo(res);
  return why;
}

std::optional<std::string> send_all(int fd, const std::uint8_t* p, std::size_t n, deadline until) {
  while (n > 0) {
    pollfd pf{fd, POLLOUT, 0};
    if (::poll(&pf, 1, remaining_ms(until)) != 1)
      return std::string{"the host did not take the request within the timeout"};
    auto w = ::send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0) {
      if (errno == EAGAIN || errno == EINTR)
        continue;
      return std::string{"sending: "} + std::strerror(errno);
    }
    p += w;
    n -= static_cast<std::size_t>(w);
  }
  return std::nullopt;
}

std::optional<std::string> recv_all(int fd, std::uint8_t* p, std::size_t n, deadline until) {
  while (n > 0) {
    pollfd pf{fd, POLLIN, 0};
    int r = ::poll(&pf, 1, remaining_ms(until));
    if (r != 1)
      return std::string{"no answer within the timeout"};
    auto got = ::recv(fd, p, n, 0);
    if (got == 0)
      return std::string{"the host closed the connection"};
    if (got < 0) {
      if (errno == EAGAIN || errno == EINTR)
        continue;
      return std::string{"receiving: "} + std::strerror(errno);
    }
    p += got;
    n -= static_cast<std::size_t>(got);
  }
  return std::nullopt;
}

// A connection to the host's node.inspect, in plain TCP or, with a TLS context, mutual TLS
// (the host runs node.tls): the handshake happens in the first receive.
struct channel {
  connection c;
  std::unique_ptr<actors::tls_session> tls;
  std::vector<std::uint8_t> plain; // decrypted and not yet taken
  bool answered = false;           // some answer byte came

  std::optional<std::string> send(const std::uint8_t* p, std::size_t n, deadline until) {
    if (!tls)
      return send_all(c.fd, p, n, until);
    std::vector<std::uint8_t> records;
    if (!tls->to_peer(p, n, records))
      return tls->error();
    return records.empty() ? std::nullopt : send_all(c.fd, records.data(), records.size(), until);
  }

  std::optional<std::string> recv(std::uint8_t* p, std::size_t n, deadline until) {
    if (!tls) {
      auto why = recv_all(c.fd, p, n, until);
      // A host that runs node.tls closes a plain client at its first bytes, without a word.
      if (why && !answered && *why == "the host closed the connection")
        *why += " without answering (if it runs node.tls, the shell needs --cert, --key and --ca)";
      answered = answered || !why;
      return why;
    }
    while (plain.size() < n) {
      pollfd pf{c.fd, POLLIN, 0};
      if (::poll(&pf, 1, remaining_ms(until)) != 1)
        return std::string{tls->established() ? "no answer within the timeout" : "no TLS handshake within the timeout"};
      std::uint8_t buf[16384];
      auto got = ::recv(c.fd, buf, sizeof buf, 0);
      if (got == 0)
        return std::string{tls->established() ? "the host closed the connection"
                                              : "the host closed the connection during the TLS handshake "
                                                "(does it run node.tls with the CA of --ca?)"};
      if (got < 0) {
        if (errno == EAGAIN || errno == EINTR)
          continue;
        return std::string{"receiving: "} + std::strerror(errno);
      }
      std::vector<std::uint8_t> back;
      bool ok = tls->from_network(buf, static_cast<std::size_t>(got), plain, back);
      if (!back.empty())
        if (auto why = send_all(c.fd, back.data(), back.size(), until))
          return why;
      if (!ok)
        return tls->error();
    }
    std::copy(plain.begin(), plain.begin() + static_cast<std::ptrdiff_t>(n), p);
    plain.erase(plain.begin(), plain.begin() + static_cast<std::ptrdiff_t>(n));
    return std::nullopt;
  }
};

struct outcome {
  bool ok = false;
  std::string text; // the answer's JSON, or the error
};

// One query: connect, send an INSPECT_REQUEST, read the INSPECT_REPLY; all within timeout_ms.
outcome ask(const actors::endpoint& ep, const std::string& query, int timeout_ms,
            const std::shared_ptr<const actors::tls_context>& tls) {
  static std::uint64_t next_id = 1;
  auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  channel ch;
  if (auto why = dial(ep, until, ch.c))
    return {false, "cannot connect: " + *why};
  if (tls) {
    ch.tls = std::make_unique<actors::tls_session>(tls);
    std::vector<std::uint8_t> hello;
    ch.tls->start(hello);
    if (auto why = send_all(ch.c.fd, hello.data(), hello.size(), until))
      return {false, *why};
  }
  auto id = next_id++;
  auto bytes = wire::encode(wire::message{wire::inspect_request{id, query}});
  auto n = static_cast<std::uint32_t>(bytes.size());
  std::uint8_t header[4] = {static_cast<std::uint8_t>(n >> 24), static_cast<std::uint8_t>(n >> 16),
                            static_cast<std::uint8_t>(n >> 8), static_cast<std::uint8_t>(n)};
  std::vector<std::uint8_t> request(header, header + 4);
  request.insert(request.end(), bytes.begin(), bytes.end());
  if (auto why = ch.send(request.data(), request.size(), until))
    return {false, *why};
  if (auto why = ch.recv(header, 4, until))
    return {false, *why};
  std::size_t len = std::size_t{header[0]} << 24 | std::size_t{header[1]} << 16 | std::size_t{header[2]} << 8 | header[3];
  if (len == 0 || len > max_reply_bytes)
    return {false, "the host announced a reply of " + std::to_string(len) + " bytes"};
  std::vector<std::uint8_t> frame(len);
  if (auto why = ch.recv(frame.data(), len, until))
    return {false, *why};
  auto decoded = wire::decode(frame.data(), frame.size(), wire::decode_limits{max_reply_bytes});
  if (auto* f = std::get_if<wire::wire_failure>(&decoded))
    return {false, std::string{"a bad reply: "} + wire::to_string(f->code) + ": " + f->detail};
  auto* rep = std::get_if<wire::inspect_reply>(&std::get<wire::message>(decoded));
  if (rep == nullptr || rep->request_id != id)
    return {false, "the host answered something else than this request"};
  return {rep->ok, rep->body};
}

std::string help_text() {
  std::ostringstream out;
  auto line = [&](const std::string& q, const std::string& h) {
    out << "  " << q << std::string(q.size() < 14 ? 14 - q.size() : 1, ' ') << h << "\n";
  };
  for (auto& [q, h] : actors::inspect_queries())
    line(q, h);
  line("top", "top [N]: the host's actors refreshed every second, busiest first (N refreshes; "
              "interactive: until Enter)");
  line("use", "use HOST: ask HOST (a peer of this host) from now on, through the cluster; use: back");
  for (auto& [q, h] : actors::control_queries())
    line(q, h);
  line("help", "this list");
  line("quit", "leave the shell (also: exit, Ctrl-D)");
  return out.str();
}

// What a shell session knows between commands.
struct session {
  actors::endpoint ep;
  std::string target; // HOST:PORT as given
  std::string via;    // `use HOST`: the peer asked through the attached host; empty: itself
  const cli_options& opts;
  std::shared_ptr<const actors::tls_context> tls;
  std::ostream& out;
  std::ostream& err;
  bool interactive = false;
  int failures = 0;

  // Asks `query` of the host in use: the attached one, or through it the one of `use`.
  outcome ask_host(const std::string& query, const std::string& host) {
    auto q = host.empty() ? query : "@" + host + " " + query;
    // A relayed query waits for the peer's answer, bounded by the attached host.
    auto timeout = opts.timeout_ms * (host.empty() ? 1 : 2) + actors::extra_answer_ms(q);
    return ask(ep, q, timeout, tls);
  }

  std::string where() const { return via.empty() ? target : target + " (" + via + ")"; }

  void fail(const std::string& why) {
    err << "caf-gwtf shell: " << why << "\n";
    ++failures;
  }
};

// `top [N]`: the host's actors every second, with messages handled per second, busiest
// first; N refreshes, or (interactive) until Enter is pressed.
void run_top(session& s, long refreshes) {
  std::map<std::string, double> before;
  auto sampled = std::chrono::steady_clock::now();
  auto first = s.ask_host("actors", s.via);
  if (!first.ok)
    return s.fail(s.where() + ": " + first.text);
  // The answer's actor rows (objects with a string name only: the answer is a stranger's
  // bytes) and their messages handled.
  auto read = [](const std::string& text, std::map<std::string, double>& handled) {
    auto j = json::parse(text, nullptr, false);
    if (!j.is_object() || !j.contains("actors") || !j["actors"].is_array())
      return json();
    json rows = json::array();
    for (auto& a : j["actors"])
      if (a.is_object() && a.contains("actor") && a["actor"].is_string()) {
        if (a.contains("handled") && a["handled"].is_number())
          handled[a["actor"].get<std::string>()] = a["handled"].get<double>();
        rows.push_back(a);
      }
    j["actors"] = std::move(rows);
    return j;
  };
  read(first.text, before);
  sampled = std::chrono::steady_clock::now();
  for (long n = 0; refreshes <= 0 || n < refreshes; ++n) {
    if (s.interactive) { // Enter stops; otherwise wait a second
      pollfd p{STDIN_FILENO, POLLIN, 0};
      if (::poll(&p, 1, 1000) == 1) {
        std::string ignored;
        std::getline(std::cin, ignored);
        return;
      }
    } else {
      ::poll(nullptr, 0, 1000);
    }
    auto r = s.ask_host("actors", s.via);
    auto now = std::chrono::steady_clock::now();
    if (!r.ok)
      return s.fail(s.where() + ": " + r.text);
    std::map<std::string, double> after;
    auto j = read(r.text, after);
    if (j.is_null())
      return s.fail(s.where() + ": top: the host's answer to actors has no actor list");
    auto secs = std::chrono::duration<double>(now - sampled).count();
    sampled = now;
    for (auto& a : j["actors"]) {
      auto name = a["actor"].get<std::string>();
      if (after.count(name) > 0 && before.count(name) > 0 && secs > 0)
        a["per_s"] = (after[name] - before[name]) / secs;
      else
        a["per_s"] = nullptr;
    }
    std::stable_sort(j["actors"].begin(), j["actors"].end(), [](const json& a, const json& b) {
      auto rate = [](const json& x) { return x["per_s"].is_number() ? x["per_s"].get<double>() : -1.0; };
      return rate(a) > rate(b);
    });
    before = std::move(after);
    if (s.opts.json) {
      s.out << j.dump() << std::endl;
      continue;
    }
    if (s.interactive)
      s.out << "\033[H\033[2J"; // clear the screen, like top
    s.out << "top: " << j.value("host", std::string{"?"}) << " (" << s.where() << "), messages handled per second over "
          << std::fixed << std::setprecision(1) << secs << " s" << std::defaultfloat
          << (s.interactive ? "; Enter stops" : "") << "\n"
          << table(j["actors"]) << std::flush;
  }
}

// One command line; false when the shell should end.
bool run_command(session& s, const std::string& line) {
  std::istringstream words{line};
  std::string cmd, extra;
  words >> cmd;
  if (cmd.empty())
    return true;
  if (cmd == "quit" || cmd == "exit")
    return false;
  if (cmd == "help") {
    s.out << help_text();
    return true;
  }
  std::string rest;
  std::getline(words, rest);
  std::istringstream args{rest};
  std::string query = cmd;
  if (cmd == "use") {
    std::string host;
    args >> host;
    if (args >> extra) {
      s.fail("expected use HOST (or use alone: back to " + s.target + ")");
      return true;
    }
    if (host.empty() || host == "-") {
      s.via.clear();
      if (s.interactive)
        s.out << "asking " << s.target << " again\n";
      return true;
    }
    auto r = s.ask_host("status", host); // is it there?
    if (!r.ok) {
      s.fail(s.target + ": use " + host + ": " + r.text);
      return true;
    }
    s.via = host;
    if (s.interactive)
      s.out << "asking " << host << " through " << s.target << " (use alone: back)\n";
    return true;
  }
  if (cmd == "top") {
    long n = s.interactive ? 0 : 1;
    if (args >> extra) {
      char* end = nullptr;
      n = std::strtol(extra.c_str(), &end, 10);
      std::string more;
      if (end == extra.c_str() || *end != '\0' || n < 1 || n > 86400 || (args >> more)) {
        s.fail("expected top [N], N refreshes (1 to 86400), got 'top" + rest + "'");
        return true;
      }
    }
    run_top(s, n);
    return true;
  }
  // Commands with arguments are checked here, and again by the host.
  if (cmd == "slow-link") {
    auto req = actors::parse_slow_link(cmd + rest);
    if (auto* e = std::get_if<std::string>(&req)) {
      s.fail(*e);
      return true;
    }
    auto& r = std::get<actors::slow_link_request>(req);
    std::ostringstream q;
    q << "slow-link " << r.peer << " " << r.factor;
    query = q.str();
  } else if (cmd == "trace") {
    auto req = actors::parse_trace(cmd + rest);
    if (auto* e = std::get_if<std::string>(&req)) {
      s.fail(*e);
      return true;
    }
    auto& t = std::get<actors::trace_request>(req);
    query = "trace " + t.actor + " " + std::to_string(t.seconds);
    if (s.interactive)
      s.out << "tracing " << t.actor << " of " << s.where() << " for " << t.seconds << " s ..." << std::endl;
  } else if (cmd == "inspect") {
    std::string actor;
    if (!(args >> actor) || (args >> extra)) {
      s.fail("expected inspect ACTOR, ACTOR one of " + actors::host_actor_list());
      return true;
    }
    query = "inspect " + actor;
  } else if (cmd == "actors") {
    if (args >> extra) {
      std::string more;
      if ((extra != "name" && extra != "mailbox" && extra != "handled") || (args >> more)) {
        s.fail("expected actors [name|mailbox|handled] (the sort order), got 'actors" + rest + "'");
        return true;
      }
      query = "actors " + extra;
    }
  } else if (args >> extra) {
    s.fail(cmd + " takes no argument (got '" + extra + "')");
    return true;
  }
  auto r = s.ask_host(query, s.via);
  if (!r.ok) {
    s.fail(s.where() + ": " + r.text);
    return true;
  }
  s.out << (s.opts.json ? r.text + "\n" : render_answer(cmd, r.text));
  return true;
}

const std::vector<std::string>& completions() {
  static std::vector<std::string> all = [] {
    std::vector<std::string> v{"help", "quit", "exit", "top", "use"};
    for (auto& [q, h] : actors::inspect_queries())
      v.push_back(q);
    for (auto& [q, h] : actors::control_queries())
      v.push_back(q);
    std::sort(v.begin(), v.end());
    return v;
  }();
  return all;
}

// The words Tab completes now: commands at the start of a line, an actor after inspect and
// trace, a sort order after actors.
const std::vector<std::string>* candidates = &completions();

char* complete_next(const char* text, int state) {
  static std::size_t i = 0;
  if (state == 0)
    i = 0;
  std::string prefix{text};
  while (i < candidates->size()) {
    auto& c = (*candidates)[i++];
    if (c.rfind(prefix, 0) == 0)
      return ::strdup(c.c_str());
  }
  return nullptr;
}

char** complete(const char* text, int start, int) {
  static const std::vector<std::string> sort_orders{"handled", "mailbox", "name"};
  rl_attempted_completion_over = 1; // no file names
  if (start == 0) {
    candidates = &completions();
    return rl_completion_matches(text, complete_next);
  }
  std::istringstream line{std::string{rl_line_buffer, static_cast<std::size_t>(start)}};
  std::string cmd, arg;
  line >> cmd;
  if (line >> arg) // only the first argument is completed
    return nullptr;
  if (cmd == "inspect" || cmd == "trace")
    candidates = &actors::host_actor_names();
  else if (cmd == "actors")
    candidates = &sort_orders;
  else
    return nullptr;
  return rl_completion_matches(text, complete_next);
}

} // namespace

namespace {
std::string render(const std::string& query, const std::string& json_text);
} // namespace

std::string render_answer(const std::string& query, const std::string& json_text) {
  try {
    return render(query, json_text);
  } catch (const std::exception&) { // a field of an unexpected type: show the answer as it came
    return json_text + "\n";
  }
}

namespace {

std::string render(const std::string& query, const std::string& json_text) {
  auto j = json::parse(json_text, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    return json_text + "\n";
  if (query == "graph" && j.contains("dot") && j["dot"].is_string())
    return j["dot"].get<std::string>();
  std::ostringstream out;
  std::vector<std::pair<std::string, const json*>> lists;
  for (auto& [k, v] : j.items()) {
    if (v.is_array() && !v.empty() && v.front().is_object())
      lists.emplace_back(k, &v);
    else if (v.is_array() || v.is_object())
      out << k << ": " << (v.empty() ? std::string{"-"} : v.dump()) << "\n";
    else
      out << k << ": " << scalar(v) << "\n";
  }
  for (auto& [k, v] : lists)
    out << k << " (" << v->size() << "):\n" << table(*v);
  return out.str();
}

} // namespace

int run_shell(const cli_options& opts, std::ostream& out, std::ostream& err) {
  auto ep = actors::parse_endpoint(opts.target);
  if (!ep || ep->port == 0) {
    err << "caf-gwtf shell: expected HOST:PORT (a host's node.inspect address), got '" << opts.target << "'\n";
    return exit_code::usage;
  }
  std::shared_ptr<const actors::tls_context> tls;
  if (!opts.ca.empty()) {
    std::string why;
    tls = actors::tls_context::make({opts.cert, opts.key, opts.ca, ""}, actors::tls_side::client, why);
    if (!tls) {
      // The context names node.tls.* keys; the shell's flags are --cert, --key, --ca.
      for (auto [key, flag] : {std::pair{"node.tls.certificate", "--cert"}, {"node.tls.key", "--key"}, {"node.tls.ca", "--ca"}})
        for (auto at = why.find(key); at != std::string::npos; at = why.find(key))
          why.replace(at, std::strlen(key), flag);
      err << "caf-gwtf shell: " << why << "\n";
      return exit_code::usage;
    }
  }
  session s{*ep, opts.target, {}, opts, tls, out, err};
  if (!opts.command.empty()) {
    // Several commands separated by ';' (e.g. "use r2-oregon; flows"); stops at the first
    // that fails.
    std::istringstream commands{opts.command};
    for (std::string one; std::getline(commands, one, ';');)
      if (!run_command(s, one) || s.failures > 0)
        break;
    return s.failures == 0 ? exit_code::ok : exit_code::failure;
  }
  s.interactive = true;
  rl_attempted_completion_function = complete;
  using_history();
  out << "caf-gwtf shell on " << opts.target << ": type help for the commands, quit to leave" << std::endl;
  for (;;) {
    auto prompt = (s.via.empty() ? opts.target : opts.target + "/" + s.via) + "> ";
    char* raw = readline(prompt.c_str());
    if (raw == nullptr) { // Ctrl-D
      out << "\n";
      break;
    }
    std::string line{raw};
    std::free(raw);
    if (line.find_first_not_of(" \t") != std::string::npos)
      add_history(line.c_str());
    if (!run_command(s, line))
      break;
    out.flush();
  }
  return exit_code::ok;
}

} // namespace gwtf::app
