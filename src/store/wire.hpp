// The TCP store's wire format, shared by server and client. Every frame is a fixed 12-byte header
// (magic, version, type, payload length; little-endian) and a payload whose layout depends on the
// type. Everything read from a socket goes through these bounds-checked decoders: a frame that is
// too long, of an unknown type or with a payload that does not parse exactly is rejected.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace strata::store {

constexpr uint32_t kMagic = 0x41525453;  // "STRA"
constexpr uint16_t kVersion = 1;
constexpr size_t kHeaderBytes = 12;
constexpr size_t kMaxKey = 4096;
constexpr size_t kMaxValue = size_t(64) << 20;
constexpr size_t kMaxKeysPerWait = 4096;
constexpr size_t kMaxPayload = kMaxValue + kMaxKey + 64;

enum class Type : uint16_t {
  hello = 1,  // payload: token
  set = 2,    // key, value
  get = 3,    // key
  add = 4,    // key, int64 delta
  wait = 5,   // u32 count, then count keys
  ok = 16,    // reply: value (get), int64 (add) or empty
  error = 17, // reply: message
};

struct Header {
  Type type;
  uint32_t length;
};

/// A decoded request or reply. Fields not used by the type stay empty.
struct Message {
  Type type = Type::ok;
  std::string key;                // set, get, add
  std::vector<uint8_t> value;     // hello (token), set, ok (get), error (text)
  int64_t delta = 0;              // add; ok (add's result)
  std::vector<std::string> keys;  // wait
};

/// Parses a header; nullopt (with `why`) if the magic, version, type or length is wrong.
std::optional<Header> parse_header(const uint8_t* p, std::string& why);

/// Decodes a payload of `h.type`; nullopt (with `why`) unless it parses exactly.
std::optional<Message> parse_payload(const Header& h, const uint8_t* p, std::string& why);

/// Encodes a complete frame (header + payload).
std::vector<uint8_t> encode(const Message& m);

}  // namespace strata::store
