// A schedule flattened once for everything that executes it (the verifier, the simulator, the
// hardware runner): every step in one array, its dependencies and dependents as step ids, and
// each send matched to its receive on the FIFO connection (sender, receiver, channel).
#pragma once

#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "optiflow/schedule/schedule.hpp"

namespace optiflow::schedule {

/// Dense over all steps, in (rank, thread block, step) order.
using StepId = std::uint32_t;
/// Dense over all thread blocks, in (rank, thread block) order.
using BlockId = std::uint32_t;
constexpr StepId kNoStep = std::numeric_limits<StepId>::max();
constexpr std::uint32_t kNone = std::numeric_limits<std::uint32_t>::max();

struct FlatBlock {
  std::int32_t rank = 0;
  std::int32_t index = 0;  ///< within its rank
  StepId first = 0;        ///< its step 0
  StepId end = 0;          ///< one past its last step
  std::uint32_t send_connection = kNone;
  std::uint32_t recv_connection = kNone;
};

/// A FIFO connection: its k-th send is received by its k-th receive.
struct FlatConnection {
  std::int32_t src = 0;
  std::int32_t dst = 0;
  std::int32_t channel = 0;
  BlockId sender = kNone;
  BlockId receiver = kNone;
  std::uint32_t messages = 0;  ///< sends paired with a receive
};

/// What flattening does with a send that no receive takes, or a receive that no send feeds.
enum class UnpairedMessages : std::uint8_t {
  reject,  ///< throw, naming the first such step: nothing can run the schedule to its end
  keep,  ///< leave it unmatched (kNoStep): the verifier reports it as a deadlock or a lost message
};

class FlatSchedule {
 public:
  /// Flattens `schedule`, which must outlive the result. Throws support::InputError, naming the
  /// rank, block and step, when the structure cannot be flattened: a peer or dependency out of
  /// range, two blocks at one end of a connection, a step that sends (receives) in a block
  /// without a send (receive) peer, or, unless `unpaired` is keep, sends and receives that do
  /// not pair up. (verify_schedule reports these and more without throwing.)
  explicit FlatSchedule(const Schedule& schedule,
                        UnpairedMessages unpaired = UnpairedMessages::reject);

  const Schedule& schedule() const { return *schedule_; }
  std::size_t step_count() const { return steps_.size(); }
  std::span<const FlatBlock> blocks() const { return blocks_; }
  std::span<const FlatConnection> connections() const { return connections_; }

  const Step& step(StepId id) const { return *steps_[id]; }
  /// step(id).kind, without reading the IR.
  StepKind kind(StepId id) const { return kinds_[id]; }
  std::span<const StepKind> kinds() const { return kinds_; }
  const FlatBlock& block_of(StepId id) const { return blocks_[block_[id]]; }
  BlockId block_id(StepId id) const { return block_[id]; }
  std::int32_t rank_of(StepId id) const { return block_of(id).rank; }
  std::int32_t index_in_block(StepId id) const {
    return static_cast<std::int32_t>(id - block_of(id).first);
  }
  StepId id_of(std::int32_t rank, StepRef ref) const {
    return blocks_[first_block_[static_cast<std::size_t>(rank)] + static_cast<BlockId>(ref.tb)]
               .first +
           static_cast<StepId>(ref.step);
  }
  /// The first block of each rank, plus one past the last block.
  std::span<const BlockId> first_block() const { return first_block_; }

  /// The steps `id` lists in its deps (not its predecessor in the block).
  std::span<const StepId> deps(StepId id) const { return range(dep_begin_, deps_, id); }
  /// The steps that list `id` in their deps.
  std::span<const StepId> dependents(StepId id) const {
    return range(dependent_begin_, dependents_, id);
  }
  /// For a step that receives: the send it receives; kNoStep otherwise (and when unpaired).
  StepId matching_send(StepId id) const { return matching_send_[id]; }
  /// For a step that sends: the receive that takes its message; kNoStep otherwise (and when
  /// unpaired).
  StepId matching_receive(StepId id) const { return matching_receive_[id]; }
  /// What `id` waits for: the previous step of its block, its deps, and, for a step that
  /// receives, its message.
  std::int32_t prerequisite_count(StepId id) const {
    return (id > block_of(id).first ? 1 : 0) + static_cast<std::int32_t>(deps(id).size()) +
           (step_receives(kind(id)) ? 1 : 0);
  }
  /// Calls visit(step) for each step that waits for `id`: the next step of its block, its
  /// dependents and the receive that takes its message.
  template <class Visit>
  void for_each_successor(StepId id, Visit&& visit) const {
    if (id + 1 < block_of(id).end) visit(id + 1);
    for (StepId dependent : dependents(id)) visit(dependent);
    if (matching_receive(id) != kNoStep) visit(matching_receive(id));
  }
  /// For a step that sends: its position among its block's sends (= its connection's messages
  /// when paired); kNone otherwise.
  std::uint32_t message_index(StepId id) const { return message_index_[id]; }

 private:
  static std::span<const StepId> range(const std::vector<std::uint32_t>& begin,
                                       const std::vector<StepId>& items, StepId id) {
    return std::span<const StepId>(items).subspan(begin[id], begin[id + 1] - begin[id]);
  }
  void add_blocks();
  void add_steps(BlockId block);
  void add_dependents();
  void match_messages(UnpairedMessages unpaired);
  void match_connection(FlatConnection& connection, UnpairedMessages unpaired);
  std::uint32_t count_steps(BlockId block, bool (*kind_matches)(StepKind)) const;
  [[noreturn]] void fail_unpaired(const FlatConnection& connection, StepId unpaired,
                                  bool sends) const;

  const Schedule* schedule_;
  std::vector<FlatBlock> blocks_;
  std::vector<BlockId> first_block_;
  std::vector<FlatConnection> connections_;
  std::vector<const Step*> steps_;
  std::vector<StepKind> kinds_;
  std::vector<BlockId> block_;
  std::vector<std::uint32_t> dep_begin_, dependent_begin_;
  std::vector<StepId> deps_, dependents_;
  std::vector<StepId> matching_send_, matching_receive_;
  std::vector<std::uint32_t> message_index_;
};

}  // namespace optiflow::schedule
