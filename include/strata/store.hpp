// The out-of-band key-value store ranks use to find each other, and the TCP store Strata ships.
// The interface is public so that a foreign store (torch's c10d Store) can sit underneath.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "strata/types.hpp"

namespace strata {

using Bytes = std::vector<uint8_t>;

/// A job-wide key-value store. All calls are thread-safe. Blocking calls take a timeout and throw
/// strata::Error (ErrorCode::timeout) naming the key when it passes.
class Store {
 public:
  virtual ~Store() = default;
  /// Stores `value` under `key`, replacing any previous value.
  virtual void set(const std::string& key, const Bytes& value) = 0;
  /// Returns the value of `key`, waiting until some rank sets it.
  virtual Bytes get(const std::string& key, std::chrono::milliseconds timeout) = 0;
  /// Atomically adds `delta` to the integer counter at `key` (created at 0) and returns the result.
  virtual int64_t add(const std::string& key, int64_t delta) = 0;
  /// Waits until every key in `keys` is set.
  virtual void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) = 0;
  /// Asks the store to set `key` to `value` once this client is gone: its process exited or was
  /// killed, or its connection to the store broke. This is how ranks waiting for a rank learn
  /// that it died before it published what they wait for. Returns false when this store cannot
  /// tell (the default); the waiters then learn of such a death only by their timeout.
  virtual bool set_when_gone(const std::string& key, const Bytes& value) {
    (void)key, (void)value;
    return false;
  }
  /// Deletes `key` if it exists. The default does nothing (a store that cannot delete keeps
  /// them); Strata erases a group's setup records once every rank has read them.
  virtual void erase(const std::string& key) { (void)key; }
  /// The IP address this process reaches the store from ("" when unknown, the default): the
  /// interface a job spanning machines sends its traffic through (docs/architecture.md, "What a
  /// job listens on").
  virtual std::string local_address() { return {}; }
};

/// Options of the TCP store. `token` authenticates every connection: connections that do not
/// present it first are logged and closed.
struct TcpStoreOptions {
  std::string host = "127.0.0.1";  ///< address to bind (server) or to connect to (client)
  uint16_t port = 0;               ///< 0 on the server picks a free port (see TcpStoreServer::port)
  std::string token;               ///< per-job secret; every peer must present the same one
  std::chrono::milliseconds connect_timeout{60000};
  /// Asked between the client's first connection attempts (the server may not be up yet): true
  /// ends the wait with ErrorCode::aborted. Only while the constructor connects; not kept.
  std::function<bool()> cancelled;
};

/// The server side of the TCP store: a background thread serving any number of clients. Rank 0
/// runs one. Malformed or unauthenticated input closes that connection only, never the server.
class TcpStoreServer {
 public:
  explicit TcpStoreServer(const TcpStoreOptions& options);
  ~TcpStoreServer();
  TcpStoreServer(const TcpStoreServer&) = delete;
  TcpStoreServer& operator=(const TcpStoreServer&) = delete;

  /// The port actually bound.
  uint16_t port() const;
  /// Number of connections refused so far (bad token, malformed frames, oversized messages).
  uint64_t rejected_connections() const;
  /// Client connections open now.
  size_t open_connections() const;
  /// Keys held now (what a long job's splits leave behind shows here).
  size_t keys() const;
  /// Calls `f(key, value)` on the server's thread after every ADD, with the counter's new value
  /// (how the job's store sees a second process claim a rank). `f` must not block.
  void on_counter(std::function<void(const std::string& key, int64_t value)> f);

  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

/// Client connection to a TcpStoreServer. One socket, serialised by a mutex.
class TcpStore final : public Store {
 public:
  explicit TcpStore(const TcpStoreOptions& options);
  ~TcpStore() override;
  void set(const std::string& key, const Bytes& value) override;
  Bytes get(const std::string& key, std::chrono::milliseconds timeout) override;
  int64_t add(const std::string& key, int64_t delta) override;
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  /// The server sets `key` when this client's connection closes (the process's exit closes it).
  /// A client that reconnects after a failure has lost its connection, so its wishes came true.
  bool set_when_gone(const std::string& key, const Bytes& value) override;
  void erase(const std::string& key) override;
  /// This end of the connection to the server (connecting first if need be).
  std::string local_address() override;

  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

/// A view of another store with every key prefixed by `prefix` (one namespace per communicator).
class PrefixStore final : public Store {
 public:
  PrefixStore(std::shared_ptr<Store> base, std::string prefix);
  void set(const std::string& key, const Bytes& value) override;
  Bytes get(const std::string& key, std::chrono::milliseconds timeout) override;
  int64_t add(const std::string& key, int64_t delta) override;
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  bool set_when_gone(const std::string& key, const Bytes& value) override;
  void erase(const std::string& key) override { base_->erase(prefix_ + key); }
  std::string local_address() override { return base_->local_address(); }

 private:
  std::shared_ptr<Store> base_;
  std::string prefix_;
};

}  // namespace strata
