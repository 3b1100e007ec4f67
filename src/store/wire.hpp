// The TCP store's wire format, shared by the server and the client.
//
// Every frame is a fixed 12-byte header followed by a payload; all integers are little-endian:
//
//   offset 0  u32 magic    kMagic (the bytes "STRT")
//   offset 4  u16 version  kVersion
//   offset 6  u16 type     Type below
//   offset 8  u32 length   payload bytes that follow, at most max_payload(type)
//
// Payloads ("key" is a u32 length, at most kMaxKeyBytes, then that many bytes):
//   HELLO   token bytes (the whole payload)         -> OK, or the connection is closed
//   SET     key, u32 value length, value bytes      -> OK
//   GET     key, u32 ms                             -> VALUE (deferred until the key exists)
//   ADD     key, i64 delta                          -> COUNTER i64, or ERROR
//   WAIT    u32 ms, u32 count, then count keys      -> OK (deferred until all keys exist)
//   WILL    key, u32 value length, value bytes      -> OK; the server SETs it when this
//                                                      connection closes (a client's death)
//   ERASE   key                                     -> OK (whether or not the key existed)
//   OK      empty;  VALUE  value bytes;  COUNTER  i64;  ERROR  UTF-8 text;  TIMEOUT  empty
//
// A deferred GET or WAIT is answered TIMEOUT after its `ms`, so a client that waits in slices
// keeps its connection (and its WILLs) instead of reconnecting after each slice.
//
// The header alone is enough to refuse a frame (bad magic, version, type or length), so a hostile
// peer never makes anyone buffer more than the limits below. Decoders are bounds-checked and
// demand that a payload parses exactly, with no bytes left over.
#pragma once

#include <netinet/in.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "strata/error.hpp"

namespace strata::store {

constexpr uint32_t kMagic = 0x54525453;  // "STRT" in memory order
constexpr uint16_t kVersion = 2;
constexpr size_t kHeaderBytes = 12;
constexpr size_t kMaxKeyBytes = 4096;
constexpr size_t kMaxValueBytes = size_t(64) << 20;
constexpr size_t kMaxTokenBytes = 4096;
constexpr size_t kMaxWaitKeys = 65536;
constexpr size_t kMaxErrorBytes = 16384;

enum class Type : uint16_t {
  hello = 1,
  set = 2,
  get = 3,
  add = 4,
  wait = 5,
  will = 6,
  erase = 7,
  ok = 16,
  value = 17,
  counter = 18,
  error = 19,
  timeout = 20,
};

struct Header {
  Type type;
  uint32_t length;
};

/// One decoded frame. Fields the type does not use stay empty.
struct Message {
  Type type = Type::ok;
  std::string key;                // set, get, add, will
  std::vector<uint8_t> value;     // hello (token), set, will, value, error (text)
  int64_t number = 0;             // add (delta), counter (result)
  std::vector<std::string> keys;  // wait
  uint32_t timeout_ms = 0;        // get, wait: when the server answers TIMEOUT
};

/// The largest payload a frame of type `t` may carry.
size_t max_payload(Type t);
/// True for the types a client may send after HELLO.
bool is_request(Type t);
/// "HELLO", "SET", ... for log lines and errors.
std::string type_name(Type t);

/// Parses the kHeaderBytes at `p`; nullopt, with the reason in `why`, if the magic, version or
/// type is wrong or the length exceeds max_payload(type).
std::optional<Header> parse_header(const uint8_t* p, std::string& why);
/// Decodes the `n` payload bytes at `p` of a frame of type `t`; nullopt, with `why`, unless
/// they parse exactly.
std::optional<Message> parse_payload(Type t, const uint8_t* p, size_t n, std::string& why);
/// Encodes a complete frame (header and payload). Does not check limits: see request_problem.
std::vector<uint8_t> encode(const Message& m);
/// Appends a frame of type `t` whose payload is the `n` bytes at `payload` (one copy, for large
/// VALUE replies).
void append_frame(std::vector<uint8_t>& out, Type t, const uint8_t* payload, size_t n);
/// Why the server would refuse request `m` (a key, value, token or key list over the limits),
/// or "" when it is acceptable. Clients check this before sending anything.
std::string request_problem(const Message& m);

// Addresses, also shared by the server and the client (IPv4 only).

/// Resolves `host` (a name or a dotted address; "" with `passive` means any interface) with
/// getaddrinfo. On failure returns false and puts the resolver's reason in `why`.
bool resolve_ipv4(const std::string& host, uint16_t port, bool passive, sockaddr_in& out,
                  std::string& why);
/// "a.b.c.d:port", for log lines and error messages.
std::string address_string(const sockaddr_in& a);

/// The context of a store error: the operation ("store.connect"), no rank or group yet.
inline ErrorContext at(const char* op) {
  ErrorContext c;
  c.op = op;
  return c;
}

}  // namespace strata::store
