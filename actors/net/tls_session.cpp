#include "actors/net/tls_session.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <openssl/x509_vfy.h>

namespace gwtf::actors {

namespace {

// OpenSSL's queued reasons, oldest first, as "reason; reason" (and the queue cleared).
std::string openssl_reasons() {
  std::string out;
  while (auto e = ERR_get_error()) {
    const char* reason = ERR_reason_error_string(e);
    std::string text = reason ? reason : "error " + std::to_string(ERR_GET_REASON(e));
    if (out.find(text) == std::string::npos)
      out += (out.empty() ? "" : "; ") + text;
  }
  return out.empty() ? "unknown OpenSSL error" : out;
}

int passphrase_cb(char* buf, int size, int, void* user) {
  auto* pass = static_cast<const std::string*>(user);
  if (pass == nullptr || size <= 0)
    return 0;
  auto n = std::min(pass->size(), static_cast<std::size_t>(size - 1));
  std::memcpy(buf, pass->data(), n);
  buf[n] = '\0';
  return static_cast<int>(n);
}

bool readable(const std::string& path, std::string& why, const char* key) {
  std::ifstream in{path};
  if (!in) {
    why = std::string{key} + ": cannot read '" + path + "'";
    return false;
  }
  return true;
}

// The host's own certificate must chain to the CA it gives its peers: otherwise every peer
// would refuse it, one handshake at a time, with no word of why on this host.
bool chains_to_ca(SSL_CTX* ctx, std::string& why) {
  X509* cert = SSL_CTX_get0_certificate(ctx);
  if (cert == nullptr)
    return true;
  STACK_OF(X509)* chain = nullptr;
  SSL_CTX_get0_chain_certs(ctx, &chain);
  X509_STORE_CTX* v = X509_STORE_CTX_new();
  bool ok = v != nullptr && X509_STORE_CTX_init(v, SSL_CTX_get_cert_store(ctx), cert, chain) == 1
            && X509_verify_cert(v) == 1;
  if (!ok)
    why = std::string{"node.tls.certificate is not signed by node.tls.ca: "}
          + X509_verify_cert_error_string(v ? X509_STORE_CTX_get_error(v) : X509_V_ERR_UNSPECIFIED);
  X509_STORE_CTX_free(v);
  ERR_clear_error();
  return ok;
}

// The caf-gwtf names among a certificate's subject alternative names (URIs only: a DNS name
// or the subject's CN names a machine, not a host of the cluster).
tls_identity identity_of(X509* cert) {
  tls_identity out;
  if (cert == nullptr)
    return out;
  auto* names = static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(cert, NID_subject_alt_name, nullptr, nullptr));
  if (names == nullptr)
    return out;
  std::string prefix = tls_host_uri_prefix;
  for (int i = 0; i < sk_GENERAL_NAME_num(names); ++i) {
    const GENERAL_NAME* n = sk_GENERAL_NAME_value(names, i);
    if (n->type != GEN_URI)
      continue;
    const ASN1_IA5STRING* uri = n->d.uniformResourceIdentifier;
    std::string text{reinterpret_cast<const char*>(ASN1_STRING_get0_data(uri)),
                     static_cast<std::size_t>(ASN1_STRING_length(uri))};
    if (text.rfind(prefix, 0) == 0 && text.size() > prefix.size() && text.find('\0') == std::string::npos)
      out.hosts.push_back(text.substr(prefix.size()));
    else if (text == tls_shell_uri)
      out.shell = true;
  }
  GENERAL_NAMES_free(names);
  return out;
}

} // namespace

std::string tls_identity::describe() const {
  if (hosts.empty())
    return shell ? "no host name (a shell certificate, caf-gwtf:shell)" : "no caf-gwtf:host/NAME name";
  std::string out;
  for (auto& h : hosts)
    out += (out.empty() ? "" : ", ") + std::string{tls_host_uri_prefix} + h;
  return out;
}

bool tls_identity::names(const std::string& host) const {
  return std::find(hosts.begin(), hosts.end(), host) != hosts.end();
}

tls_identity tls_session::peer_identity() const {
  if (!established_)
    return {};
  return identity_of(SSL_get0_peer_certificate(static_cast<SSL*>(ssl_)));
}

std::shared_ptr<tls_context> tls_context::make(const tls_files& files, tls_side side, std::string& why) {
  ERR_clear_error();
  bool own = !files.certificate.empty() || !files.key.empty();
  if (side == tls_side::server && !own) {
    why = "node.tls: a server needs a certificate and a key";
    return nullptr;
  }
  if (own && (files.certificate.empty() || files.key.empty())) {
    why = files.certificate.empty() ? "node.tls.certificate: missing (the key needs its certificate)"
                                    : "node.tls.key: missing (the certificate needs its key)";
    return nullptr;
  }
  if (files.ca.empty()) {
    why = "node.tls.ca: missing (the cluster CA that peers' certificates must chain to)";
    return nullptr;
  }
  SSL_CTX* ctx = SSL_CTX_new(side == tls_side::server ? TLS_server_method() : TLS_client_method());
  if (ctx == nullptr) {
    why = "node.tls: cannot create an OpenSSL context: " + openssl_reasons();
    return nullptr;
  }
  std::shared_ptr<tls_context> out{new tls_context(ctx, side)};
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  // CAF's openssl module dials with TLS 1.2 and this list; it excludes anonymous ciphers.
  if (SSL_CTX_set_cipher_list(ctx, "HIGH:!aNULL:!MD5") != 1) {
    why = "node.tls: cannot set the cipher list: " + openssl_reasons();
    return nullptr;
  }
  // TLS 1.3 between our hosts: AES-128-GCM first. It is 1.4x AES-256-GCM's speed with AES-NI
  // (2.8 vs 2.0 GB/s a core on the benchmark machine), and decryption is the bulk path's
  // bottleneck; 128-bit keys are what TLS 1.3 requires every implementation to offer.
  if (SSL_CTX_set_ciphersuites(ctx, "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256") != 1) {
    why = "node.tls: cannot set the TLS 1.3 cipher suites: " + openssl_reasons();
    return nullptr;
  }
  if (own) {
    if (!readable(files.certificate, why, "node.tls.certificate") || !readable(files.key, why, "node.tls.key"))
      return nullptr;
    if (SSL_CTX_use_certificate_chain_file(ctx, files.certificate.c_str()) != 1) {
      why = "node.tls.certificate: cannot load '" + files.certificate + "': " + openssl_reasons();
      return nullptr;
    }
    // The callback reads the passphrase during the load only: a local is long-lived enough.
    std::string pass = files.passphrase;
    SSL_CTX_set_default_passwd_cb(ctx, passphrase_cb);
    SSL_CTX_set_default_passwd_cb_userdata(ctx, &pass);
    bool key_ok = SSL_CTX_use_PrivateKey_file(ctx, files.key.c_str(), SSL_FILETYPE_PEM) == 1;
    SSL_CTX_set_default_passwd_cb_userdata(ctx, nullptr);
    if (!key_ok) {
      auto reasons = openssl_reasons();
      if (reasons.find("values mismatch") != std::string::npos)
        why = "node.tls.key: '" + files.key + "' is not the key of node.tls.certificate (" + reasons + ")";
      else
        why = "node.tls.key: cannot load '" + files.key + "'"
              + (files.passphrase.empty() ? " (an encrypted key needs node.tls.passphrase)" : "") + ": " + reasons;
      return nullptr;
    }
    if (SSL_CTX_check_private_key(ctx) != 1) {
      why = "node.tls.key: '" + files.key + "' is not the key of node.tls.certificate: " + openssl_reasons();
      return nullptr;
    }
  }
  if (!readable(files.ca, why, "node.tls.ca"))
    return nullptr;
  if (SSL_CTX_load_verify_locations(ctx, files.ca.c_str(), nullptr) != 1) {
    why = "node.tls.ca: cannot load '" + files.ca + "': " + openssl_reasons();
    return nullptr;
  }
  if (own && !chains_to_ca(ctx, why))
    return nullptr;
  if (own)
    out->own_ = identity_of(SSL_CTX_get0_certificate(ctx));
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
  return out;
}

tls_context::~tls_context() {
  SSL_CTX_free(static_cast<SSL_CTX*>(ctx_));
}

namespace {
// The session's output BIO: records go straight onto the end of the caller's `to_network`
// vector (set for the duration of each call), with no buffer in between.
int vector_write(BIO* b, const char* data, int n) {
  auto* out = static_cast<std::vector<std::uint8_t>*>(BIO_get_data(b));
  if (out == nullptr || n < 0)
    return -1; // outside a call: cannot happen
  auto* p = reinterpret_cast<const std::uint8_t*>(data);
  out->insert(out->end(), p, p + n);
  return n;
}

long vector_ctrl(BIO*, int cmd, long, void*) { return cmd == BIO_CTRL_FLUSH ? 1 : 0; }

int vector_create(BIO* b) {
  BIO_set_init(b, 1);
  return 1;
}

const BIO_METHOD* vector_method() {
  static BIO_METHOD* method = [] {
    auto* m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "gwtf vector sink");
    BIO_meth_set_write(m, vector_write);
    BIO_meth_set_ctrl(m, vector_ctrl);
    BIO_meth_set_create(m, vector_create);
    return m;
  }();
  return method;
}

// Points the output BIO at `to_network` for one call.
class output_to {
public:
  output_to(void* bio, std::vector<std::uint8_t>& to_network)
    : bio_(static_cast<BIO*>(bio)), before_(bio_ ? BIO_get_data(bio_) : nullptr) {
    if (bio_)
      BIO_set_data(bio_, &to_network);
  }
  ~output_to() {
    if (bio_)
      BIO_set_data(bio_, before_);
  }
  output_to(const output_to&) = delete;
  output_to& operator=(const output_to&) = delete;

private:
  BIO* bio_;
  void* before_;
};
} // namespace

tls_session::tls_session(std::shared_ptr<const tls_context> ctx) : ctx_(std::move(ctx)) {
  auto* ssl = SSL_new(static_cast<SSL_CTX*>(ctx_->native()));
  auto* in = BIO_new(BIO_s_mem());
  auto* out = BIO_new(vector_method());
  if (ssl == nullptr || in == nullptr || out == nullptr) {
    error_ = "cannot create a TLS session: " + openssl_reasons();
    SSL_free(ssl);
    BIO_free(in);
    BIO_free(out);
    return;
  }
  SSL_set_bio(ssl, in, out); // the session owns both BIOs now
  if (ctx_->side() == tls_side::server)
    SSL_set_accept_state(ssl);
  else
    SSL_set_connect_state(ssl);
  ssl_ = ssl;
  in_ = in;
  out_ = out;
}

tls_session::~tls_session() {
  SSL_free(static_cast<SSL*>(ssl_));
}

void tls_session::fail(int ret, const char* during) {
  auto* ssl = static_cast<SSL*>(ssl_);
  int code = SSL_get_error(ssl, ret);
  std::string why;
  if (code == SSL_ERROR_ZERO_RETURN) {
    why = "the peer closed the TLS session";
  } else {
    why = std::string{"TLS "} + during + " failed: " + openssl_reasons();
    long verify = SSL_get_verify_result(ssl);
    if (verify != X509_V_OK)
      why += " (peer certificate: " + std::string{X509_verify_cert_error_string(verify)} + ")";
  }
  error_ = why;
}

namespace {
// Appends to a vector, a record (at most 16 KiB) at a time.
struct vector_sink final : tls_session::plain_sink {
  explicit vector_sink(std::vector<std::uint8_t>& v) : out(v) {}
  std::vector<std::uint8_t>& out;
  std::size_t at = 0;
  std::pair<std::uint8_t*, std::size_t> space() override {
    constexpr std::size_t record = 16384;
    at = out.size();
    out.resize(at + record);
    return {out.data() + at, record};
  }
  bool wrote(std::size_t n) override {
    out.resize(at + n);
    return true;
  }
};
} // namespace

bool tls_session::drive(plain_sink& sink, std::vector<std::uint8_t>& to_network) {
  output_to target{out_, to_network};
  auto* ssl = static_cast<SSL*>(ssl_);
  ERR_clear_error();
  if (!established_) {
    int r = SSL_do_handshake(ssl);
    if (r == 1) {
      established_ = true;
    } else {
      int code = SSL_get_error(ssl, r);
      if (code != SSL_ERROR_WANT_READ && code != SSL_ERROR_WANT_WRITE) {
        fail(r, "handshake");
        return false;
      }
    }
  }
  if (established_) {
    if (!held_.empty()) {
      auto held = std::move(held_);
      held_.clear();
      if (!to_peer(held.data(), held.size(), to_network))
        return false;
    }
    for (;;) {
      auto [at, room] = sink.space();
      int n = SSL_read(ssl, at, static_cast<int>(std::min<std::size_t>(room, 1 << 30)));
      if (n > 0) {
        if (!sink.wrote(static_cast<std::size_t>(n)))
          break;
        continue;
      }
      sink.wrote(0);
      int code = SSL_get_error(ssl, n);
      if (code == SSL_ERROR_WANT_READ || code == SSL_ERROR_WANT_WRITE)
        break;
      fail(n, "read");
      return false;
    }
  }
  return true;
}

bool tls_session::start(std::vector<std::uint8_t>& to_network) {
  if (failed())
    return false;
  std::vector<std::uint8_t> none;
  vector_sink sink{none};
  return drive(sink, to_network);
}

bool tls_session::from_network(const std::uint8_t* data, std::size_t size, std::vector<std::uint8_t>& plain,
                               std::vector<std::uint8_t>& to_network) {
  vector_sink sink{plain};
  return from_network(data, size, sink, to_network);
}

bool tls_session::from_network(const std::uint8_t* data, std::size_t size, plain_sink& sink,
                               std::vector<std::uint8_t>& to_network) {
  if (failed())
    return false;
  if (size == 0)
    return true;
  if (!seen_first_byte_) {
    seen_first_byte_ = true;
    // Every TLS connection opens with a handshake record (content type 22). Anything else is
    // a peer speaking plain TCP (BASP, HTTP, a port scanner): say so rather than quote OpenSSL.
    if (ctx_->side() == tls_side::server && data[0] != 22) {
      char hex[8];
      std::snprintf(hex, sizeof(hex), "0x%02x", data[0]);
      error_ = std::string{"not a TLS handshake (first byte "} + hex + "): a plain TCP peer, refused";
      return false;
    }
  }
  auto* in = static_cast<BIO*>(in_);
  while (size > 0) {
    int chunk = static_cast<int>(std::min<std::size_t>(size, 1 << 30));
    int n = BIO_write(in, data, chunk);
    if (n <= 0) {
      error_ = "cannot buffer TLS input: " + openssl_reasons();
      return false;
    }
    data += n;
    size -= static_cast<std::size_t>(n);
  }
  return drive(sink, to_network);
}

bool tls_session::to_peer(const std::uint8_t* data, std::size_t size, std::vector<std::uint8_t>& to_network) {
  if (failed())
    return false;
  if (!established_) {
    held_.insert(held_.end(), data, data + size);
    return true;
  }
  output_to target{out_, to_network};
  auto* ssl = static_cast<SSL*>(ssl_);
  ERR_clear_error();
  while (size > 0) {
    int chunk = static_cast<int>(std::min<std::size_t>(size, 1 << 20));
    int n = SSL_write(ssl, data, chunk);
    if (n <= 0) {
      fail(n, "write");
      return false;
    }
    data += n;
    size -= static_cast<std::size_t>(n);
  }
  return true;
}

std::string tls_session::peer_subject() const {
  if (!established_)
    return {};
  X509* cert = SSL_get0_peer_certificate(static_cast<SSL*>(ssl_));
  if (cert == nullptr)
    return {};
  char buf[512];
  X509_NAME_oneline(X509_get_subject_name(cert), buf, sizeof(buf));
  return buf;
}

} // namespace gwtf::actors
