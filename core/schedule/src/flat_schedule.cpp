#include "optiflow/schedule/flat_schedule.hpp"

#include <map>
#include <string>
#include <tuple>

#include "optiflow/support/error.hpp"

namespace optiflow::schedule {
namespace {

[[noreturn]] void fail(const Schedule& schedule, const std::string& message) {
  throw support::InputError(support::SourceLocation{schedule.name, 0, 0, {}}, message);
}

std::string block_text(std::int32_t rank, std::int32_t tb) {
  return "rank " + std::to_string(rank) + " tb " + std::to_string(tb);
}

std::string step_text(std::int32_t rank, std::int32_t tb, std::int32_t index, StepKind kind) {
  return block_text(rank, tb) + " step " + std::to_string(index) + " (" +
         std::string(to_string(kind)) + ")";
}

}  // namespace

FlatSchedule::FlatSchedule(const Schedule& schedule, UnpairedMessages unpaired)
    : schedule_(&schedule) {
  if (schedule.ranks < 0 || static_cast<std::size_t>(schedule.ranks) != schedule.programs.size())
    fail(schedule, "the schedule has " + std::to_string(schedule.ranks) + " ranks but " +
                       std::to_string(schedule.programs.size()) + " rank programs");
  add_blocks();
  match_messages(unpaired);
}

void FlatSchedule::add_blocks() {
  const Schedule& schedule = *schedule_;
  std::map<std::tuple<std::int32_t, std::int32_t, std::int32_t>, std::uint32_t> index;
  auto connect = [&](std::int32_t src, std::int32_t dst, std::int32_t channel, BlockId block,
                     bool sending) {
    const auto [it, inserted] =
        index.try_emplace({src, dst, channel}, static_cast<std::uint32_t>(connections_.size()));
    if (inserted) connections_.push_back(FlatConnection{src, dst, channel});
    BlockId& end = sending ? connections_[it->second].sender : connections_[it->second].receiver;
    if (end != kNone) {
      const FlatBlock& self = blocks_[block];
      fail(schedule, block_text(self.rank, self.index) + ": another block (tb " +
                         std::to_string(blocks_[end].index) + ") already " +
                         (sending ? "sends to rank " + std::to_string(dst)
                                  : "receives from rank " + std::to_string(src)) +
                         " on channel " + std::to_string(channel));
    }
    end = block;
    return it->second;
  };
  auto check_peer = [&](std::int32_t rank, std::int32_t tb, std::int32_t peer) {
    if (peer == -1) return false;
    if (peer < 0 || peer >= schedule.ranks || peer == rank)
      fail(schedule,
           block_text(rank, tb) + ": peer " + std::to_string(peer) + " is not another rank");
    return true;
  };

  std::size_t step_total = 0, block_total = 0;
  for (const RankProgram& program : schedule.programs) {
    block_total += program.tbs.size();
    for (const ThreadBlock& tb : program.tbs) step_total += tb.steps.size();
  }
  blocks_.reserve(block_total);
  steps_.resize(step_total);
  kinds_.resize(step_total);
  block_.resize(step_total);
  dep_begin_.resize(step_total + 1);
  deps_.reserve(step_total);
  StepId first = 0;
  for (std::size_t r = 0; r < schedule.programs.size(); ++r) {
    // All of a rank's blocks first: a step may depend on a step of a later block.
    first_block_.push_back(static_cast<BlockId>(blocks_.size()));
    const auto& tbs = schedule.programs[r].tbs;
    for (std::size_t t = 0; t < tbs.size(); ++t) {
      const ThreadBlock& tb = tbs[t];
      const auto id = static_cast<BlockId>(blocks_.size());
      const auto rank = static_cast<std::int32_t>(r);
      const auto tb_index = static_cast<std::int32_t>(t);
      const StepId end = first + static_cast<StepId>(tb.steps.size());
      blocks_.push_back(FlatBlock{rank, tb_index, first, end, kNone, kNone});
      first = end;
      if (check_peer(rank, tb_index, tb.send_peer))
        blocks_[id].send_connection = connect(rank, tb.send_peer, tb.channel, id, true);
      if (check_peer(rank, tb_index, tb.recv_peer))
        blocks_[id].recv_connection = connect(tb.recv_peer, rank, tb.channel, id, false);
    }
    for (BlockId b = first_block_.back(); b < blocks_.size(); ++b) add_steps(b);
  }
  first_block_.push_back(static_cast<BlockId>(blocks_.size()));
  add_dependents();
}

// Each step of the IR is read here only: the IR is scattered over the heap.
void FlatSchedule::add_steps(BlockId b) {
  const FlatBlock& block = blocks_[b];
  const auto& tbs = schedule_->programs[static_cast<std::size_t>(block.rank)].tbs;
  const ThreadBlock& tb = tbs[static_cast<std::size_t>(block.index)];
  for (std::size_t s = 0; s < tb.steps.size(); ++s) {
    const Step& step = tb.steps[s];
    // Such a step would silently belong to no connection and never pair up.
    const bool sends_nowhere = step_sends(step.kind) && tb.send_peer == -1;
    const bool receives_from_nowhere = step_receives(step.kind) && tb.recv_peer == -1;
    if (sends_nowhere || receives_from_nowhere)
      fail(*schedule_, step_text(block.rank, block.index, static_cast<std::int32_t>(s), step.kind) +
                           (sends_nowhere ? ": sends, but the block has no send peer"
                                          : ": receives, but the block has no receive peer"));
    const StepId id = block.first + static_cast<StepId>(s);
    steps_[id] = &step;
    kinds_[id] = step.kind;
    block_[id] = b;
    for (const StepRef& dep : step.deps) {
      const bool in_range = dep.tb >= 0 && static_cast<std::size_t>(dep.tb) < tbs.size() &&
                            dep.step >= 0 &&
                            static_cast<std::size_t>(dep.step) < tbs[dep.tb].steps.size();
      if (!in_range)
        fail(*schedule_, block_text(block.rank, block.index) + " step " + std::to_string(s) +
                             ": dependency on tb " + std::to_string(dep.tb) + " step " +
                             std::to_string(dep.step) + ", which does not exist");
      deps_.push_back(id_of(block.rank, dep));
    }
    dep_begin_[id + 1] = static_cast<std::uint32_t>(deps_.size());
  }
}

// Counting sort: dependents grouped by the step they wait for, in step order.
void FlatSchedule::add_dependents() {
  const std::size_t n = steps_.size();
  dependent_begin_.assign(n + 1, 0);
  for (StepId target : deps_) ++dependent_begin_[target + 1];
  for (std::size_t i = 0; i < n; ++i) dependent_begin_[i + 1] += dependent_begin_[i];
  dependents_.resize(deps_.size());
  std::vector<std::uint32_t> next(dependent_begin_.begin(), dependent_begin_.end() - 1);
  for (StepId id = 0; id < n; ++id)
    for (StepId target : deps(id)) dependents_[next[target]++] = id;
}

void FlatSchedule::match_messages(UnpairedMessages unpaired) {
  const std::size_t n = steps_.size();
  matching_send_.assign(n, kNoStep);
  matching_receive_.assign(n, kNoStep);
  message_index_.assign(n, kNone);
  for (FlatConnection& connection : connections_) match_connection(connection, unpaired);
}

// FIFO: the k-th send of the sending block pairs with the k-th receive of the receiving one.
void FlatSchedule::match_connection(FlatConnection& connection, UnpairedMessages unpaired) {
  // Lambdas rather than function pointers, so that the scans inline the test.
  const auto sends = [](StepKind kind) { return step_sends(kind); };
  const auto receives = [](StepKind kind) { return step_receives(kind); };
  auto next_step = [&](BlockId block, StepId from, auto kind_matches) {
    if (block == kNone) return kNoStep;
    for (StepId id = from; id < blocks_[block].end; ++id)
      if (kind_matches(kinds_[id])) return id;
    return kNoStep;
  };
  const StepId sender_first = connection.sender == kNone ? 0 : blocks_[connection.sender].first;
  const StepId receiver_first =
      connection.receiver == kNone ? 0 : blocks_[connection.receiver].first;
  StepId send = next_step(connection.sender, sender_first, sends);
  StepId recv = next_step(connection.receiver, receiver_first, receives);
  std::uint32_t sent = 0;
  StepId first_unreceived = kNoStep;
  for (; send != kNoStep; send = next_step(connection.sender, send + 1, sends)) {
    message_index_[send] = sent++;
    if (recv == kNoStep) {
      if (first_unreceived == kNoStep) first_unreceived = send;
      continue;
    }
    matching_receive_[send] = recv;
    matching_send_[recv] = send;
    ++connection.messages;
    recv = next_step(connection.receiver, recv + 1, receives);
  }
  if (unpaired == UnpairedMessages::keep) return;
  if (first_unreceived != kNoStep) fail_unpaired(connection, first_unreceived, true);
  if (recv != kNoStep) fail_unpaired(connection, recv, false);
}

std::uint32_t FlatSchedule::count_steps(BlockId block, bool (*kind_matches)(StepKind)) const {
  if (block == kNone) return 0;
  std::uint32_t count = 0;
  for (StepId s = blocks_[block].first; s < blocks_[block].end; ++s)
    count += kind_matches(kinds_[s]);
  return count;
}

void FlatSchedule::fail_unpaired(const FlatConnection& connection, StepId unpaired,
                                 bool sends) const {
  const FlatBlock& block = block_of(unpaired);
  const Step& step = *steps_[unpaired];
  const std::string src = std::to_string(connection.src), dst = std::to_string(connection.dst);
  const std::string channel = " on channel " + std::to_string(connection.channel);
  fail(*schedule_, step_text(block.rank, block.index, index_in_block(unpaired), step.kind) +
                       (sends ? ": its message to rank " + dst + channel + " is never received"
                              : ": no message from rank " + src + channel + " is left for it") +
                       " (rank " + src + " sends " +
                       std::to_string(count_steps(connection.sender, step_sends)) +
                       " messages to rank " + dst + channel + ", which receives " +
                       std::to_string(count_steps(connection.receiver, step_receives)) + ")");
}

}  // namespace optiflow::schedule
