// Mutual TLS over byte buffers (a memory BIO in; records appended straight to the caller's
// buffer out), with no sockets and no CAF: the socket loop (actors/net/peer_io.cpp)
// terminates the TLS of every inbound peer connection with it, and tests run whole handshakes
// between two sessions in memory. Every failure is a value: the session says why in words
// (no certificate, another CA's certificate, plain TCP, a broken record) and stays failed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace gwtf::actors {

/// The files of a host's cluster identity (node.tls).
struct tls_files {
  std::string certificate; ///< PEM certificate chain of this host, signed by the cluster CA
  std::string key;         ///< PEM private key of `certificate`
  std::string ca;          ///< PEM certificate(s) of the cluster CA: peers must chain to it
  std::string passphrase;  ///< decrypts `key` when it is encrypted; empty: not encrypted
};

/// What a certificate of the cluster CA says its holder is (docs/deploy.md, "Identity"): a host
/// certificate carries the SAN URI `caf-gwtf:host/NAME` for each host name it may introduce; a
/// shell certificate carries `caf-gwtf:shell` and no host name, so it can never join as a host.
struct tls_identity {
  std::vector<std::string> hosts; ///< from `caf-gwtf:host/NAME` URIs, in certificate order
  bool shell = false;             ///< it carries `caf-gwtf:shell`
  /// "caf-gwtf:host/a, caf-gwtf:host/b" or "no caf-gwtf:host/NAME name" for messages.
  std::string describe() const;
  bool names(const std::string& host) const;
};

/// The SAN URI prefix of a host certificate's names.
inline constexpr const char* tls_host_uri_prefix = "caf-gwtf:host/";
inline constexpr const char* tls_shell_uri = "caf-gwtf:shell";

/// Which end of a connection a context serves.
enum class tls_side { server, client };

/// An OpenSSL context: this host's certificate and key, the CA it trusts, peer verification on
/// (VERIFY_PEER | FAIL_IF_NO_PEER_CERT), TLS 1.2 or later. Shared by the sessions made from it.
class tls_context {
public:
  /// Loads and cross-checks the files: each must be readable PEM, the key must match the
  /// certificate and the certificate must chain to the CA. nullptr and `why` (naming the file
  /// and OpenSSL's reason) on failure. A client context may have no certificate and key
  /// (both empty): it can only reach servers that do not ask for one.
  static std::shared_ptr<tls_context> make(const tls_files& files, tls_side side, std::string& why);

  ~tls_context();
  tls_context(const tls_context&) = delete;
  tls_context& operator=(const tls_context&) = delete;

  tls_side side() const { return side_; }
  void* native() const { return ctx_; } ///< the SSL_CTX
  /// What this end's own certificate names (empty without a certificate).
  const tls_identity& own() const { return own_; }

private:
  tls_context(void* ctx, tls_side side) : ctx_(ctx), side_(side) {}
  void* ctx_;
  tls_side side_;
  tls_identity own_;
};

/// One TLS connection driven by bytes: what arrives from the network goes in, plaintext and
/// records to send come out.
class tls_session {
public:
  explicit tls_session(std::shared_ptr<const tls_context> ctx);
  ~tls_session();
  tls_session(const tls_session&) = delete;
  tls_session& operator=(const tls_session&) = delete;

  /// A client's first flight (ClientHello) into `to_network`; a server has none.
  bool start(std::vector<std::uint8_t>& to_network);

  /// Feeds bytes received from the peer: decrypted application data is appended to `plain`,
  /// handshake answers and alerts to `to_network` (send them even when this returns false: a
  /// failed handshake ends with an alert that tells the peer why). False once failed.
  bool from_network(const std::uint8_t* data, std::size_t size, std::vector<std::uint8_t>& plain,
                    std::vector<std::uint8_t>& to_network);

  /// Where decrypted bytes go without a buffer in between: `space` offers room (size > 0),
  /// `wrote(n)` takes the first n bytes of it and says whether to go on.
  struct plain_sink {
    virtual std::pair<std::uint8_t*, std::size_t> space() = 0;
    virtual bool wrote(std::size_t n) = 0;
  protected:
    ~plain_sink() = default;
  };
  /// The same, decrypting straight into `sink`. A sink that says stop ends the call; what
  /// was not decrypted yet stays in the session.
  bool from_network(const std::uint8_t* data, std::size_t size, plain_sink& sink,
                    std::vector<std::uint8_t>& to_network);

  /// Encrypts `size` bytes of plaintext for the peer into `to_network`; before the handshake
  /// completes they are held and sent when it does. False once failed.
  bool to_peer(const std::uint8_t* data, std::size_t size, std::vector<std::uint8_t>& to_network);

  bool established() const { return established_; } ///< the handshake completed, peer verified
  bool failed() const { return !error_.empty(); }
  const std::string& error() const { return error_; } ///< why it failed; empty while it has not
  std::string peer_subject() const; ///< the verified peer certificate's subject, e.g. "CN=relay-1"
  /// What the verified peer certificate names; empty before the handshake completed.
  tls_identity peer_identity() const;

private:
  bool drive(plain_sink& sink, std::vector<std::uint8_t>& to_network);
  void fail(int ret, const char* during);

  std::shared_ptr<const tls_context> ctx_;
  void* ssl_ = nullptr;  // SSL*
  void* in_ = nullptr;   // BIO* the session reads network bytes from
  void* out_ = nullptr;  // BIO* the session writes network bytes to
  bool established_ = false;
  bool seen_first_byte_ = false;
  std::vector<std::uint8_t> held_; // plaintext written before the handshake completed
  std::string error_;
};

} // namespace gwtf::actors
