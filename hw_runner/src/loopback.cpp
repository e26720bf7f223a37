#include <cstring>
#include <stdexcept>
#include <string>

#include "optiflow/hw_runner/transport.hpp"

namespace optiflow::hw_runner {

class LoopbackNetwork::Endpoint final : public Transport {
 public:
  Endpoint(LoopbackNetwork& network, std::int32_t rank) : network_(network), rank_(rank) {}

  Handle send(std::int32_t peer, std::int32_t channel, const void* data,
              std::size_t bytes) override {
    Connection& connection = network_.connections_[{rank_, peer, channel}];
    const auto* first = static_cast<const std::byte*>(data);
    connection.messages.emplace_back(first, first + bytes);
    network_.deliver(connection);
    return kSent;
  }

  Handle recv(std::int32_t peer, std::int32_t channel, void* data, std::size_t bytes) override {
    const Key key{peer, rank_, channel};
    const auto handle = static_cast<Handle>(network_.pending_.size());
    network_.pending_.push_back(Pending{data, bytes, false});
    Connection& connection = network_.connections_[key];
    connection.receives.push_back(handle);
    network_.deliver(connection);
    return handle;
  }

  bool done(Handle handle) override {
    return handle == kSent || network_.pending_.at(handle).complete;
  }

 private:
  static constexpr Handle kSent = ~Handle{0};
  LoopbackNetwork& network_;
  std::int32_t rank_;
};

LoopbackNetwork::LoopbackNetwork(std::int32_t ranks) {
  for (std::int32_t rank = 0; rank < ranks; ++rank)
    endpoints_.push_back(std::make_unique<Endpoint>(*this, rank));
}

LoopbackNetwork::~LoopbackNetwork() = default;

Transport& LoopbackNetwork::endpoint(std::int32_t rank) {
  return *endpoints_.at(static_cast<std::size_t>(rank));
}

void LoopbackNetwork::deliver(Connection& connection) {
  while (!connection.messages.empty() && !connection.receives.empty()) {
    Pending& receive = pending_[connection.receives.front()];
    const std::vector<std::byte>& message = connection.messages.front();
    // MPI's rule for a message longer than its receive: an error, never a silent cut.
    if (message.size() > receive.bytes)
      throw std::runtime_error("loopback: a message of " + std::to_string(message.size()) +
                               " bytes arrived for a receive of " + std::to_string(receive.bytes));
    std::memcpy(receive.data, message.data(), message.size());
    receive.complete = true;
    connection.messages.pop_front();
    connection.receives.pop_front();
  }
}

}  // namespace optiflow::hw_runner
