// Encoding and bounds-checked decoding of store frames (layout in wire.hpp).
#include "store/wire.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>

#include <cstdio>
#include <cstring>

namespace strata::store {
namespace {

// Explicit little-endian, so the format does not depend on the host.
void put_le(std::vector<uint8_t>& b, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) b.push_back(uint8_t(v >> (8 * i)));
}
uint64_t get_le(const uint8_t* p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= uint64_t(p[i]) << (8 * i);
  return v;
}

// A cursor that refuses to read past the end of the payload.
class Reader {
 public:
  Reader(const uint8_t* p, size_t n) : p_(p), left_(n) {}
  size_t left() const { return left_; }
  bool u32(uint32_t& v) {
    if (left_ < 4) return false;
    v = uint32_t(get_le(take(4), 4));
    return true;
  }
  bool i64(int64_t& v) {
    if (left_ < 8) return false;
    v = int64_t(get_le(take(8), 8));
    return true;
  }
  bool bytes(size_t n, const uint8_t*& out) {
    if (left_ < n) return false;
    out = take(n);
    return true;
  }
  bool key(std::string& k) {
    uint32_t n = 0;
    const uint8_t* d = nullptr;
    if (!u32(n) || n > kMaxKeyBytes || !bytes(n, d)) return false;
    k.assign(reinterpret_cast<const char*>(d), n);
    return true;
  }

 private:
  const uint8_t* take(size_t n) {
    const uint8_t* at = p_;
    p_ += n;
    left_ -= n;
    return at;
  }
  const uint8_t* p_;
  size_t left_;
};

constexpr size_t kKeyField = 4 + kMaxKeyBytes;  // the largest encoded key

bool known(uint16_t t) { return (t >= 1 && t <= 7) || (t >= 16 && t <= 20); }

void put_key(std::vector<uint8_t>& b, const std::string& k) {
  put_le(b, k.size(), 4);
  b.insert(b.end(), k.begin(), k.end());
}

}  // namespace

size_t max_payload(Type t) {
  switch (t) {
    case Type::hello:
      return kMaxTokenBytes;
    case Type::set:
    case Type::will:
      return kKeyField + 4 + kMaxValueBytes;
    case Type::get:
      return kKeyField + 4;
    case Type::erase:
      return kKeyField;
    case Type::add:
      return kKeyField + 8;
    case Type::wait:
      return kKeyField + 4 + kMaxValueBytes;  // as large as a SET, no larger
    case Type::ok:
    case Type::timeout:
      return 0;
    case Type::value:
      return kMaxValueBytes;
    case Type::counter:
      return 8;
    case Type::error:
      return kMaxErrorBytes;
  }
  return 0;
}

bool is_request(Type t) {
  return t == Type::set || t == Type::get || t == Type::add || t == Type::wait || t == Type::will ||
         t == Type::erase;
}

std::string type_name(Type t) {
  switch (t) {
    case Type::hello:
      return "HELLO";
    case Type::set:
      return "SET";
    case Type::get:
      return "GET";
    case Type::add:
      return "ADD";
    case Type::wait:
      return "WAIT";
    case Type::will:
      return "WILL";
    case Type::erase:
      return "ERASE";
    case Type::ok:
      return "OK";
    case Type::value:
      return "VALUE";
    case Type::counter:
      return "COUNTER";
    case Type::error:
      return "ERROR";
    case Type::timeout:
      return "TIMEOUT";
  }
  return "type " + std::to_string(int(t));
}

std::optional<Header> parse_header(const uint8_t* p, std::string& why) {
  const uint32_t magic = uint32_t(get_le(p, 4));
  if (magic != kMagic) {
    char hex[16];
    std::snprintf(hex, sizeof hex, "0x%08x", magic);
    why = std::string("bad magic ") + hex + " (not a Strata store peer)";
    return std::nullopt;
  }
  const uint16_t version = uint16_t(get_le(p + 4, 2));
  if (version != kVersion) {
    why = "protocol version " + std::to_string(version) + ", expected " + std::to_string(kVersion);
    return std::nullopt;
  }
  const uint16_t type = uint16_t(get_le(p + 6, 2));
  if (!known(type)) {
    why = "unknown message type " + std::to_string(type);
    return std::nullopt;
  }
  const uint32_t length = uint32_t(get_le(p + 8, 4));
  if (length > max_payload(Type(type))) {
    why = type_name(Type(type)) + " frame announces " + std::to_string(length) +
          " payload bytes, over its limit of " + std::to_string(max_payload(Type(type)));
    return std::nullopt;
  }
  return Header{Type(type), length};
}

std::optional<Message> parse_payload(Type t, const uint8_t* p, size_t n, std::string& why) {
  Reader r(p, n);
  Message m;
  m.type = t;
  const uint8_t* d = nullptr;
  bool ok = true;
  switch (t) {
    case Type::hello:
    case Type::value:
    case Type::error:
      ok = r.bytes(n, d);
      if (ok) m.value.assign(d, d + n);
      break;
    case Type::set:
    case Type::will: {
      uint32_t len = 0;
      ok = r.key(m.key) && r.u32(len) && len <= kMaxValueBytes && r.bytes(len, d);
      if (ok) m.value.assign(d, d + len);
      break;
    }
    case Type::get:
      ok = r.key(m.key) && r.u32(m.timeout_ms);
      break;
    case Type::erase:
      ok = r.key(m.key);
      break;
    case Type::add:
      ok = r.key(m.key) && r.i64(m.number);
      break;
    case Type::counter:
      ok = r.i64(m.number);
      break;
    case Type::wait: {
      uint32_t count = 0;
      // Each key takes at least 4 bytes, so a count larger than that is a lie: refuse it before
      // reserving anything.
      ok = r.u32(m.timeout_ms) && r.u32(count) && count <= kMaxWaitKeys &&
           size_t(count) * 4 <= r.left();
      if (ok) m.keys.resize(count);
      for (uint32_t i = 0; ok && i < count; ++i) ok = r.key(m.keys[i]);
      break;
    }
    case Type::ok:
    case Type::timeout:
      break;
  }
  if (!ok || r.left() != 0) {
    why = "malformed " + type_name(t) + " payload of " + std::to_string(n) + " bytes";
    return std::nullopt;
  }
  return m;
}

std::vector<uint8_t> encode(const Message& m) {
  // The header goes first and gets its length once the payload is in place: one copy of a value.
  std::vector<uint8_t> f;
  f.reserve(kHeaderBytes + 8 + m.key.size() + m.value.size());
  put_le(f, kMagic, 4);
  put_le(f, kVersion, 2);
  put_le(f, uint16_t(m.type), 2);
  put_le(f, 0, 4);
  switch (m.type) {
    case Type::hello:
    case Type::value:
    case Type::error:
      f.insert(f.end(), m.value.begin(), m.value.end());
      break;
    case Type::set:
    case Type::will:
      put_key(f, m.key);
      put_le(f, m.value.size(), 4);
      f.insert(f.end(), m.value.begin(), m.value.end());
      break;
    case Type::get:
      put_key(f, m.key);
      put_le(f, m.timeout_ms, 4);
      break;
    case Type::erase:
      put_key(f, m.key);
      break;
    case Type::add:
      put_key(f, m.key);
      put_le(f, uint64_t(m.number), 8);
      break;
    case Type::counter:
      put_le(f, uint64_t(m.number), 8);
      break;
    case Type::wait:
      put_le(f, m.timeout_ms, 4);
      put_le(f, m.keys.size(), 4);
      for (const auto& k : m.keys) put_key(f, k);
      break;
    case Type::ok:
    case Type::timeout:
      break;
  }
  const uint64_t length = f.size() - kHeaderBytes;
  for (int i = 0; i < 4; ++i) f[8 + i] = uint8_t(length >> (8 * i));
  return f;
}

void append_frame(std::vector<uint8_t>& out, Type t, const uint8_t* payload, size_t n) {
  out.reserve(out.size() + kHeaderBytes + n);
  put_le(out, kMagic, 4);
  put_le(out, kVersion, 2);
  put_le(out, uint16_t(t), 2);
  put_le(out, n, 4);
  out.insert(out.end(), payload, payload + n);
}

std::string request_problem(const Message& m) {
  auto key_problem = [](const std::string& k) -> std::string {
    if (k.size() <= kMaxKeyBytes) return "";
    return "key of " + std::to_string(k.size()) + " bytes is longer than the limit of " +
           std::to_string(kMaxKeyBytes);
  };
  switch (m.type) {
    case Type::hello:
      if (m.value.size() > kMaxTokenBytes) {
        return "job token of " + std::to_string(m.value.size()) +
               " bytes is longer than the limit of " + std::to_string(kMaxTokenBytes);
      }
      return "";
    case Type::set:
    case Type::will:
      if (m.value.size() > kMaxValueBytes) {
        return "value of " + std::to_string(m.value.size()) +
               " bytes is larger than the limit of " + std::to_string(kMaxValueBytes);
      }
      return key_problem(m.key);
    case Type::get:
    case Type::add:
    case Type::erase:
      return key_problem(m.key);
    case Type::wait: {
      if (m.keys.size() > kMaxWaitKeys) {
        return "cannot wait for " + std::to_string(m.keys.size()) + " keys at once (limit " +
               std::to_string(kMaxWaitKeys) + ")";
      }
      size_t bytes = 8;
      for (const auto& k : m.keys) {
        if (auto p = key_problem(k); !p.empty()) return p;
        bytes += 4 + k.size();
      }
      if (bytes > max_payload(Type::wait)) return "the keys to wait for are too long in total";
      return "";
    }
    default:
      return "not a request";
  }
}

bool resolve_ipv4(const std::string& host, uint16_t port, bool passive, sockaddr_in& out,
                  std::string& why) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = passive ? AI_PASSIVE : 0;
  addrinfo* res = nullptr;
  const char* node = host.empty() && passive ? nullptr : host.c_str();
  const int rc = ::getaddrinfo(node, nullptr, &hints, &res);
  if (rc != 0 || res == nullptr) {
    why = rc != 0 ? ::gai_strerror(rc) : "no IPv4 address";
    return false;
  }
  std::memcpy(&out, res->ai_addr, sizeof out);
  ::freeaddrinfo(res);
  out.sin_port = htons(port);
  return true;
}

std::string address_string(const sockaddr_in& a) {
  char buf[INET_ADDRSTRLEN] = "?";
  ::inet_ntop(AF_INET, &a.sin_addr, buf, sizeof buf);
  return std::string(buf) + ":" + std::to_string(ntohs(a.sin_port));
}

}  // namespace strata::store
