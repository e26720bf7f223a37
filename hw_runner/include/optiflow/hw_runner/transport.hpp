// The point-to-point layer a rank's executor drives: non-blocking sends and receives on the
// schedule's connections (sender, receiver, channel), completed by polling. MPI implements it
// for real; the loopback network runs every rank in one process (tests, `optiflow run` checks).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <tuple>
#include <vector>

namespace optiflow::hw_runner {

using Handle = std::uint64_t;

class Transport {
 public:
  virtual ~Transport() = default;
  /// Starts sending `bytes` from `data` to `peer` on `channel`; `data` must stay untouched
  /// until done() says so. Messages of one connection arrive in the order they were sent.
  virtual Handle send(std::int32_t peer, std::int32_t channel, const void* data,
                      std::size_t bytes) = 0;
  /// Starts receiving the next message from `peer` on `channel` into `data`.
  virtual Handle recv(std::int32_t peer, std::int32_t channel, void* data, std::size_t bytes) = 0;
  /// Whether the operation has completed; once it returns true the handle is released.
  virtual bool done(Handle handle) = 0;
};

/// Every rank's endpoint in one process. Sends complete at once (the message is copied into
/// the connection); a receive completes when its message is there. Single-threaded.
class LoopbackNetwork {
 public:
  explicit LoopbackNetwork(std::int32_t ranks);
  ~LoopbackNetwork();
  Transport& endpoint(std::int32_t rank);

 private:
  class Endpoint;
  struct Pending {
    void* data = nullptr;
    std::size_t bytes = 0;
    bool complete = false;
  };
  using Key = std::tuple<std::int32_t, std::int32_t, std::int32_t>;  // src, dst, channel
  struct Connection {
    std::deque<std::vector<std::byte>> messages;
    std::deque<Handle> receives;
  };
  void deliver(Connection& connection);

  std::map<Key, Connection> connections_;
  std::vector<Pending> pending_;
  std::vector<std::unique_ptr<Endpoint>> endpoints_;
};

}  // namespace optiflow::hw_runner
