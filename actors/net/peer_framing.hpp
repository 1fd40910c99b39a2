// The byte stream of one peer connection in node mode, as a pure codec (no CAF, no sockets):
// what the socket loop (actors/net/peer_io.cpp) writes after TCP (and TLS), and checks
// before it allocates anything a peer announced. docs/wire.md, "Peer connections".
//
// A stream is a sequence of fragments, each a 16-byte header and `length` payload bytes:
//   0  magic "GWTF"            8  length (u32, big-endian): payload bytes of this fragment
//   4  lane (0 control, 1 bulk) 12 total (u32, big-endian): bytes of the whole frame
//   5  flags (first, last, introduction, hello)
//   6  service                 7  protocol version
// A frame (one Cap'n Proto wire message, actors/net/wire_frame.hpp) is cut into fragments of
// at most `fragment_bytes`; the fragments of one lane arrive in order, and the two lanes
// interleave at fragment boundaries. The sender always takes the control lane first, so a
// heartbeat waits for at most one bulk fragment, never for a whole gradient share. The first
// fragment of every stream is a hello (no payload): a stream that starts otherwise is not a
// caf-gwtf peer.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <utility>
#include <vector>

#include <sys/uio.h>

namespace gwtf::actors {

namespace peer_framing {
constexpr std::size_t header_bytes = 16;
constexpr std::uint8_t version = 1;
constexpr std::uint8_t first = 1, last = 2, introduction = 4, hello = 8;
constexpr std::size_t fragment_bytes = 64 * 1024; ///< payload per fragment a sender cuts
/// A reader's first buffer for a frame (then 4x what it held, never above the frame's size).
constexpr std::size_t first_room = 256 * 1024;
enum lane : std::uint8_t { control = 0, bulk = 1 };
constexpr std::size_t lanes = 2;

/// The lane of a service's frames: the stage's (activations, gradients, shares, states) are
/// bulk; membership, probes, flows, discovery and inspection are control. One service, one
/// lane: every service's frames keep their order.
lane lane_of(std::int32_t service);

/// Appends a fragment header to `out` (the payload follows it).
void write_header(std::vector<std::uint8_t>& out, std::uint8_t lane, std::uint8_t flags, std::int32_t service,
                  std::uint32_t length, std::uint32_t total);
/// The same into `header_bytes` bytes at `at`.
void write_header(std::uint8_t* at, std::uint8_t lane, std::uint8_t flags, std::int32_t service,
                  std::uint32_t length, std::uint32_t total);
std::uint32_t read32(const std::uint8_t* at); ///< big-endian

/// A hello fragment (the first bytes of every stream).
std::vector<std::uint8_t> hello_bytes();
} // namespace peer_framing

/// A whole frame taken out of the stream.
struct inbound_frame {
  std::int32_t service = 0;
  bool introduction = false;
  std::vector<std::uint8_t> bytes;
};

/// Follows the fragments of one inbound stream. Memory: at most one partial frame per lane,
/// each at most `max_frame` bytes, growing with its fragments as they arrive (a fragment
/// carries at most `fragment_bytes`; the buffer is at most `first_room` or 4 times what came),
/// never from what a header announced.
/// Bytes go in by copy (`feed`) or straight from the socket (`space`, then `wrote`): a
/// fragment's payload is read into its frame, with no buffer in between.
class frame_reader {
public:
  explicit frame_reader(std::uint64_t max_frame) : max_frame_(max_frame) {}

  /// Takes the next `n` bytes; complete frames are appended to `out`. Returns an empty
  /// string while the stream is acceptable, else why not (close the connection; later calls
  /// keep failing).
  std::string feed(const std::uint8_t* data, std::size_t n, std::vector<inbound_frame>& out);

  /// Where the next bytes of the stream belong and how many of them this reader expects at
  /// most: the rest of a fragment header, or of a fragment's payload, inside its frame (the
  /// frame grows by the fragment the first time). {nullptr, 0} once failed.
  std::pair<std::uint8_t*, std::size_t> space();
  /// `n` bytes (at most what `space` offered) were written there; as `feed` otherwise.
  std::string wrote(std::size_t n, std::vector<inbound_frame>& out);
  /// The bytes `space` offers are a payload's (worth reading straight into the frame).
  bool in_payload() const { return payload_left_ > 0; }

  bool greeted() const { return greeted_; } ///< the peer's hello arrived
  /// Bytes held for frames not yet whole (what a peer made this reader allocate): per lane at
  /// most 256 KiB or 4 times the payload that arrived, whatever a header announced.
  std::size_t buffered() const;
  std::uint64_t frames() const { return frames_; }

private:
  std::string fail(std::string why);
  std::string on_header();
  void fragment_done(std::vector<inbound_frame>& out);
  void make_room(std::size_t end); // the current lane's frame may hold `end` bytes

  struct partial {
    bool open = false;
    std::uint32_t total = 0;
    inbound_frame frame;
  };
  std::uint64_t max_frame_;
  std::uint8_t header_[peer_framing::header_bytes] = {};
  std::size_t have_ = 0;     // bytes of the current header
  std::uint32_t payload_left_ = 0;
  std::uint32_t fragment_length_ = 0;
  std::size_t fragment_at_ = 0; // where the current fragment's payload starts in its frame
  std::uint8_t lane_ = 0;
  std::uint8_t flags_ = 0;
  partial partial_[peer_framing::lanes];
  bool greeted_ = false;
  std::uint64_t frames_ = 0;
  std::string error_;
};

/// The frames waiting to go to one peer, cut into fragments on demand, control lane first.
/// A sender gathers the next bytes as (pointer, length) pieces of the queued frames and of
/// the fragment headers, writes what the socket takes, and says how much that was: no byte
/// of a frame is copied on its way out. A fragment once begun is finished before any other.
class frame_writer {
public:
  /// Queues a frame (taken over) on its service's lane, or on the bulk lane with `behind_bulk`
  /// (a frame that must not overtake what was sent before it). Frames of one lane leave in
  /// the order queued.
  void push(std::int32_t service, bool introduction, std::vector<std::uint8_t> bytes, bool behind_bulk = false);
  /// Fills `iov` (at most `max_iov` entries, at most `max_bytes` bytes) with the next bytes
  /// of the stream, in order; they stay valid until `consumed` or `push`. Returns the entries
  /// used (0: nothing queued).
  std::size_t gather(iovec* iov, std::size_t max_iov, std::size_t max_bytes);
  /// The first `n` bytes of the last `gather` left (n at most what it gathered).
  void consumed(std::size_t n);
  /// Appends the next whole fragment (the rest of a begun one) to `out`; false when nothing
  /// is queued.
  bool next(std::vector<std::uint8_t>& out);
  bool empty() const { return !current_.active && q_[0].empty() && q_[1].empty(); }
  std::uint64_t queued_bytes() const { return queued_bytes_; } ///< payload not yet cut
  std::size_t queued_frames() const { return q_[0].size() + q_[1].size(); }

private:
  struct pending {
    std::int32_t service;
    bool introduction;
    std::vector<std::uint8_t> bytes;
    std::size_t cut = 0;  // payload bytes in fragments begun
    bool begun = false;   // its first fragment was cut
  };
  struct fragment {
    bool active = false;
    std::uint8_t lane = 0;
    std::uint8_t header[peer_framing::header_bytes] = {};
    const std::uint8_t* payload = nullptr;
    std::size_t length = 0;
    std::size_t done = 0; // header and payload bytes gone
  };
  // The header of the fragment of `f` starting at payload offset `at`; its length.
  static std::size_t header_for(const pending& f, std::uint8_t lane, std::size_t at, std::uint8_t* header);
  static bool has_more(const pending& f) { return !f.begun || f.cut < f.bytes.size(); }

  std::deque<pending> q_[peer_framing::lanes];
  fragment current_; // begun and not yet gone whole
  std::vector<std::array<std::uint8_t, peer_framing::header_bytes>> headers_; // of the last gather
  std::uint64_t queued_bytes_ = 0;
};

} // namespace gwtf::actors
