// The store server's requests: HELLO (the job's token) first, then the others; a GET or WAIT
// whose keys are not all there is parked on its connection and answered when they are, or with
// TIMEOUT.
#include <algorithm>
#include <charconv>
#include <optional>

#include "base/log.hpp"
#include "store/server_impl.hpp"
#include "strata/error.hpp"

namespace strata {
namespace store {
namespace {

/// Counters are stored as decimal text, so GET shows them readably and SET can seed one.
std::optional<int64_t> parse_counter(const std::vector<uint8_t>& v) {
  const char* b = reinterpret_cast<const char*>(v.data());
  int64_t x = 0;
  auto [end, ec] = std::from_chars(b, b + v.size(), x);
  if (v.empty() || ec != std::errc() || end != b + v.size()) return std::nullopt;
  return x;
}

}  // namespace
}  // namespace store

void TcpStoreServer::Impl::hello(ServerConnection& c, const Message& m) {
  // Compare without an early exit, so timing does not reveal how much of the token matched.
  unsigned diff = m.value.size() != token_.size();
  for (size_t i = 0; i < m.value.size() && i < token_.size(); ++i) {
    diff |= m.value[i] ^ uint8_t(token_[i]);
  }
  if (diff != 0) return reject_saying(c, store::Refusal::wrong_token, "wrong job token");
  c.authenticated = true;
  forget_unauthenticated(c);
  reply(c, Message{});
}

void TcpStoreServer::Impl::handle(ServerConnection& c, Message m) {
  switch (m.type) {
    case Type::set:
      data_[std::move(m.key)] = std::move(m.value);
      data_changed_ = true;
      keys_.store(data_.size(), std::memory_order_relaxed);
      reply(c, Message{});
      return;
    case Type::add: {
      int64_t now = 0;
      auto it = data_.find(m.key);
      if (it != data_.end()) {
        auto v = store::parse_counter(it->second);
        if (!v) return reply_error(c, "key '" + m.key + "' holds a value that is not a counter");
        now = *v;
      }
      int64_t next = 0;
      if (__builtin_add_overflow(now, m.number, &next)) {
        return reply_error(c, "adding " + std::to_string(m.number) + " to key '" + m.key +
                                  "' (now " + std::to_string(now) + ") overflows int64");
      }
      const std::string text = std::to_string(next);
      data_[m.key].assign(text.begin(), text.end());
      data_changed_ = true;
      keys_.store(data_.size(), std::memory_order_relaxed);
      {
        std::lock_guard<std::mutex> lock(on_counter_mu_);
        if (on_counter_) on_counter_(m.key, next);
      }
      Message r;
      r.type = Type::counter;
      r.number = next;
      reply(c, r);
      return;
    }
    case Type::will:
      c.wills.emplace_back(std::move(m.key), std::move(m.value));
      reply(c, Message{});
      return;
    case Type::erase:
      data_.erase(m.key);
      keys_.store(data_.size(), std::memory_order_relaxed);
      reply(c, Message{});
      return;
    case Type::get:
    case Type::wait:
      if (try_answer(c, m)) return;
      if (m.timeout_ms == 0) return reply(c, Message{.type = Type::timeout});
      if (m.timeout_ms != store::kNoTimeout) {
        c.deferred_until = Clock::now() + std::chrono::milliseconds(m.timeout_ms);
      }
      c.deferred = std::move(m);
      return;
    default:
      return;  // pump() lets only requests through
  }
}

bool TcpStoreServer::Impl::try_answer(ServerConnection& c, const Message& m) {
  if (m.type == Type::get) {
    auto it = data_.find(m.key);
    if (it == data_.end()) return false;
    store::append_frame(c.out, Type::value, it->second.data(), it->second.size());
    return true;
  }
  for (const auto& k : m.keys) {
    if (!data_.count(k)) return false;
  }
  reply(c, Message{});
  return true;
}

void TcpStoreServer::Impl::answer_deferred() {
  // An answered request lets its connection's next frame run, which may be another SET.
  while (data_changed_) {
    data_changed_ = false;
    for (auto& c : conns_) {
      if (c->closed || !c->deferred || !try_answer(*c, *c->deferred)) continue;
      c->deferred.reset();
      c->deferred_until = Clock::time_point::max();
      service_or_reject(*c, 0);  // 0: send, then handle what is buffered
    }
  }
}

void TcpStoreServer::Impl::reply(ServerConnection& c, const Message& m) {
  const auto f = store::encode(m);
  c.out.insert(c.out.end(), f.begin(), f.end());
}

void TcpStoreServer::Impl::reply_error(ServerConnection& c, const std::string& text) {
  Message e;
  e.type = Type::error;
  e.value.assign(text.begin(),
                 text.begin() + std::ptrdiff_t(std::min(text.size(), store::kMaxErrorBytes)));
  reply(c, e);
}

void TcpStoreServer::Impl::reject_saying(ServerConnection& c, store::Refusal cause,
                                         const std::string& why) {
  // Say why before closing, so the client reports it rather than retrying a handshake that a
  // flood might have cut; best effort, never waited for.
  Message e;
  e.type = Type::error;
  e.value.assign(why.begin(),
                 why.begin() + std::ptrdiff_t(std::min(why.size(), store::kMaxErrorBytes)));
  const auto f = store::encode(e);
  ssize_t ignored = ::send(c.fd, f.data(), f.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  (void)ignored;
  reject(c, cause, why);
}

void TcpStoreServer::Impl::reject(ServerConnection& c, store::Refusal cause,
                                  const std::string& why) {
  refusals_.refused(cause, c.peer, why);
  ++rejected_;
  close(c);
}

}  // namespace strata
