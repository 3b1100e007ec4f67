#include "store/wire.hpp"

#include <cstring>

namespace strata::store {
namespace {

// Little-endian readers/writers; the build targets x86-64, but the format is fixed regardless.
void put32(std::vector<uint8_t>& b, uint32_t v) {
  for (int i = 0; i < 4; ++i) b.push_back(uint8_t(v >> (8 * i)));
}
void put64(std::vector<uint8_t>& b, uint64_t v) {
  for (int i = 0; i < 8; ++i) b.push_back(uint8_t(v >> (8 * i)));
}
uint64_t get_le(const uint8_t* p, int n) {
  uint64_t v = 0;
  for (int i = 0; i < n; ++i) v |= uint64_t(p[i]) << (8 * i);
  return v;
}

// A cursor over a payload that refuses to read past its end.
struct Reader {
  const uint8_t* p;
  size_t left;
  bool u32(uint32_t& v) {
    if (left < 4) return false;
    v = uint32_t(get_le(p, 4));
    p += 4, left -= 4;
    return true;
  }
  bool i64(int64_t& v) {
    if (left < 8) return false;
    v = int64_t(get_le(p, 8));
    p += 8, left -= 8;
    return true;
  }
  bool bytes(size_t n, const uint8_t*& out) {
    if (left < n) return false;
    out = p;
    p += n, left -= n;
    return true;
  }
  bool key(std::string& k) {
    uint32_t n;
    const uint8_t* d;
    if (!u32(n) || n == 0 || n > kMaxKey || !bytes(n, d)) return false;
    k.assign(reinterpret_cast<const char*>(d), n);
    return true;
  }
};

bool known(uint16_t t) {
  return (t >= 1 && t <= 5) || t == 16 || t == 17;
}

}  // namespace

std::optional<Header> parse_header(const uint8_t* p, std::string& why) {
  if (get_le(p, 4) != kMagic) {
    why = "bad magic";
    return std::nullopt;
  }
  if (get_le(p + 4, 2) != kVersion) {
    why = "unsupported protocol version " + std::to_string(get_le(p + 4, 2));
    return std::nullopt;
  }
  uint16_t t = uint16_t(get_le(p + 6, 2));
  if (!known(t)) {
    why = "unknown message type " + std::to_string(t);
    return std::nullopt;
  }
  uint32_t len = uint32_t(get_le(p + 8, 4));
  if (len > kMaxPayload) {
    why = "payload of " + std::to_string(len) + " bytes exceeds the limit";
    return std::nullopt;
  }
  return Header{Type(t), len};
}

std::optional<Message> parse_payload(const Header& h, const uint8_t* p, std::string& why) {
  Reader r{p, h.length};
  Message m;
  m.type = h.type;
  const uint8_t* d = nullptr;
  bool ok = true;
  switch (h.type) {
    case Type::hello:
    case Type::error:
      ok = r.bytes(r.left, d);
      if (ok) m.value.assign(d, d + h.length);
      break;
    case Type::ok:
      ok = r.bytes(r.left, d);
      if (ok) m.value.assign(d, d + h.length);
      if (h.length == 8) m.delta = int64_t(get_le(p, 8));
      break;
    case Type::set: {
      ok = r.key(m.key);
      uint32_t n = 0;
      ok = ok && r.u32(n) && n <= kMaxValue && r.bytes(n, d);
      if (ok) m.value.assign(d, d + n);
      break;
    }
    case Type::get: ok = r.key(m.key); break;
    case Type::add: ok = r.key(m.key) && r.i64(m.delta); break;
    case Type::wait: {
      uint32_t n = 0;
      ok = r.u32(n) && n <= kMaxKeysPerWait;
      for (uint32_t i = 0; ok && i < n; ++i) {
        std::string k;
        ok = r.key(k);
        m.keys.push_back(std::move(k));
      }
      break;
    }
  }
  if (!ok || r.left != 0) {
    why = "malformed payload for message type " + std::to_string(int(h.type));
    return std::nullopt;
  }
  return m;
}

std::vector<uint8_t> encode(const Message& m) {
  std::vector<uint8_t> payload;
  auto put_key = [&](const std::string& k) {
    put32(payload, uint32_t(k.size()));
    payload.insert(payload.end(), k.begin(), k.end());
  };
  switch (m.type) {
    case Type::hello:
    case Type::error:
    case Type::ok: payload = m.value; break;
    case Type::set:
      put_key(m.key);
      put32(payload, uint32_t(m.value.size()));
      payload.insert(payload.end(), m.value.begin(), m.value.end());
      break;
    case Type::get: put_key(m.key); break;
    case Type::add:
      put_key(m.key);
      put64(payload, uint64_t(m.delta));
      break;
    case Type::wait:
      put32(payload, uint32_t(m.keys.size()));
      for (const auto& k : m.keys) put_key(k);
      break;
  }
  std::vector<uint8_t> frame;
  frame.reserve(kHeaderBytes + payload.size());
  put32(frame, kMagic);
  frame.push_back(uint8_t(kVersion)), frame.push_back(uint8_t(kVersion >> 8));
  frame.push_back(uint8_t(uint16_t(m.type))), frame.push_back(uint8_t(uint16_t(m.type) >> 8));
  put32(frame, uint32_t(payload.size()));
  frame.insert(frame.end(), payload.begin(), payload.end());
  return frame;
}

}  // namespace strata::store
