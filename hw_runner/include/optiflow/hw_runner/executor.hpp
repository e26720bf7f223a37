// One rank's execution of a flattened schedule over a Transport: every thread block advances
// concurrently, each in its own order and after its dependencies, as MSCCL's runtime runs them.
//
// Receives are posted ahead, a bounded FIFO per connection (NCCL's NCCL_STEPS = 8 in flight),
// so a send can complete before its receiver reaches the step that consumes it. A receive that
// only stores its data lands straight in its destination when nothing else on the rank could
// see it arrive early; any other lands in a staging slot, and its step copies or reduces it
// into place. Sends go from the user buffers. A step that sends completes when the transport
// has taken its data.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "optiflow/hw_runner/buffers.hpp"
#include "optiflow/hw_runner/transport.hpp"
#include "optiflow/schedule/flat_schedule.hpp"

namespace optiflow::hw_runner {

struct ExecutorOptions {
  std::uint32_t slots_per_connection = 8;  ///< receives posted ahead per connection
};

class RankExecutor {
 public:
  /// Checks that every step of `rank` addresses chunks inside its buffers (throws
  /// support::InputError otherwise). `flat`, `buffers` and `transport` must outlive it.
  RankExecutor(const schedule::FlatSchedule& flat, std::int32_t rank, RankBuffers& buffers,
               Transport& transport, ExecutorOptions options = {});

  /// Begins one execution of the schedule: every step pending, receives posted ahead.
  void start();
  /// Advances every thread block as far as it can without blocking; true when every step of
  /// this rank has completed (and the execution begun by start() is over).
  bool progress();
  bool finished() const { return blocks_left_ == 0; }
  /// Steps completed since start(): a caller can tell a poll that moved from one that did not.
  std::size_t steps_completed() const { return steps_completed_; }
  /// This rank's receives that land straight in their destination (no staging copy).
  std::size_t receives_in_place() const;

  /// What the unfinished blocks wait for, one per line, e.g. "tb 1 step 3 (r) waits for
  /// message 2 from rank 5 on channel 0" (at most `max_lines`).
  std::string waiting_on(std::size_t max_lines = 4) const;

 private:
  enum class Phase : std::uint8_t { waiting, sending };
  struct BlockState {
    schedule::BlockId id = 0;
    schedule::StepId current = 0;
    Phase phase = Phase::waiting;
    Handle send = 0;
    bool holds_slot = false;  ///< a recv-reduce-send sends from its staging slot
    std::uint32_t receive_queue = schedule::kNone;
  };
  struct ReceiveQueue {
    std::int32_t peer = 0, channel = 0;
    std::vector<schedule::StepId> steps;  ///< the block's receiving steps, in order
    std::vector<std::vector<Element>> slots;
    std::vector<Handle> handles;
    std::vector<char> arrived;
    std::size_t posted = 0, consumed = 0;
  };

  bool advance(BlockState& block);
  bool ready(BlockState& block);
  void run_local_part(schedule::StepId id, std::span<const Element> received);
  void post_receives(ReceiveQueue& queue);
  void release_slot(ReceiveQueue& queue);
  void finish_step(BlockState& block);
  void find_direct_receives(schedule::StepId end_step);
  std::span<Element> src_of(const schedule::Step& step);
  std::span<Element> dst_of(const schedule::Step& step);
  std::size_t bytes_of(const schedule::Step& step) const;

  const schedule::FlatSchedule& flat_;
  std::int32_t rank_;
  RankBuffers& buffers_;
  Transport& transport_;
  ExecutorOptions options_;
  schedule::StepId first_step_ = 0;
  std::vector<char> done_;  ///< per step of this rank
  /// Per step of this rank: where its receive lands in place, or null (a staging slot).
  std::vector<Element*> lands_in_place_;
  std::vector<BlockState> blocks_;
  std::vector<ReceiveQueue> queues_;
  std::size_t blocks_left_ = 0;
  std::size_t steps_completed_ = 0;
};

}  // namespace optiflow::hw_runner
