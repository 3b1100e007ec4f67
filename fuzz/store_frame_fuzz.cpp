// libFuzzer target: the TCP store's frame decoder (src/store/wire.cpp), which reads bytes from
// any process that connects to rank 0's port. Every input must be refused or decoded, never
// crash; and whatever decodes must encode back to a frame that decodes to the same message.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "store/wire.hpp"

using namespace strata::store;

namespace {

bool same(const Message& a, const Message& b) {
  return a.type == b.type && a.key == b.key && a.value == b.value && a.number == b.number &&
         a.keys == b.keys && a.timeout_ms == b.timeout_ms;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < kHeaderBytes) return 0;
  std::string why;
  const auto h = parse_header(data, why);
  if (!h) return 0;
  if (h->length > max_payload(h->type)) std::abort();  // the header must enforce the limit
  const size_t n = std::min<size_t>(h->length, size - kHeaderBytes);
  const auto m = parse_payload(h->type, data + kHeaderBytes, n, why);
  if (!m) return 0;
  const std::vector<uint8_t> again = encode(*m);
  const auto h2 = parse_header(again.data(), why);
  if (!h2 || h2->type != m->type || h2->length != again.size() - kHeaderBytes) std::abort();
  const auto m2 = parse_payload(h2->type, again.data() + kHeaderBytes, h2->length, why);
  if (!m2 || !same(*m, *m2)) std::abort();
  return 0;
}
