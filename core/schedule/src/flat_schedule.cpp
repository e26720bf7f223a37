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

}  // namespace

FlatSchedule::FlatSchedule(const Schedule& schedule) : schedule_(&schedule) {
  if (schedule.ranks < 0 || static_cast<std::size_t>(schedule.ranks) != schedule.programs.size())
    fail(schedule, "the schedule has " + std::to_string(schedule.ranks) + " ranks but " +
                       std::to_string(schedule.programs.size()) + " rank programs");
  add_blocks();
  add_deps();
  match_messages();
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

  for (std::size_t r = 0; r < schedule.programs.size(); ++r) {
    first_block_.push_back(static_cast<BlockId>(blocks_.size()));
    const auto& tbs = schedule.programs[r].tbs;
    for (std::size_t t = 0; t < tbs.size(); ++t) {
      const ThreadBlock& tb = tbs[t];
      const auto id = static_cast<BlockId>(blocks_.size());
      const auto rank = static_cast<std::int32_t>(r);
      const auto tb_index = static_cast<std::int32_t>(t);
      const auto first = static_cast<StepId>(steps_.size());
      blocks_.push_back(FlatBlock{rank, tb_index, first,
                                  first + static_cast<StepId>(tb.steps.size()), kNone, kNone});
      if (check_peer(rank, tb_index, tb.send_peer))
        blocks_[id].send_connection = connect(rank, tb.send_peer, tb.channel, id, true);
      if (check_peer(rank, tb_index, tb.recv_peer))
        blocks_[id].recv_connection = connect(tb.recv_peer, rank, tb.channel, id, false);
      for (const Step& step : tb.steps) {
        steps_.push_back(&step);
        block_.push_back(id);
      }
    }
  }
  first_block_.push_back(static_cast<BlockId>(blocks_.size()));
}

void FlatSchedule::add_deps() {
  const std::size_t n = steps_.size();
  dep_begin_.assign(n + 1, 0);
  std::vector<std::uint32_t> dependent_count(n + 1, 0);
  for (StepId id = 0; id < n; ++id) {
    const FlatBlock& block = block_of(id);
    const std::size_t block_count =
        schedule_->programs[static_cast<std::size_t>(block.rank)].tbs.size();
    for (const StepRef& dep : steps_[id]->deps) {
      const bool in_range =
          dep.tb >= 0 && static_cast<std::size_t>(dep.tb) < block_count && dep.step >= 0 &&
          static_cast<std::size_t>(dep.step) <
              schedule_->programs[static_cast<std::size_t>(block.rank)].tbs[dep.tb].steps.size();
      if (!in_range)
        fail(*schedule_, block_text(block.rank, block.index) + " step " +
                             std::to_string(id - block.first) + ": dependency on tb " +
                             std::to_string(dep.tb) + " step " + std::to_string(dep.step) +
                             ", which does not exist");
      const StepId target = id_of(block.rank, dep);
      deps_.push_back(target);
      ++dependent_count[target + 1];
    }
    dep_begin_[id + 1] = static_cast<std::uint32_t>(deps_.size());
  }
  // Counting sort: dependents grouped by the step they wait for, in step order.
  dependent_begin_.assign(n + 1, 0);
  for (std::size_t i = 0; i < n; ++i)
    dependent_begin_[i + 1] = dependent_begin_[i] + dependent_count[i + 1];
  dependents_.resize(deps_.size());
  std::vector<std::uint32_t> next(dependent_begin_.begin(), dependent_begin_.end() - 1);
  for (StepId id = 0; id < n; ++id)
    for (StepId target : deps(id)) dependents_[next[target]++] = id;
}

void FlatSchedule::match_messages() {
  const std::size_t n = steps_.size();
  matching_send_.assign(n, kNoStep);
  matching_receive_.assign(n, kNoStep);
  message_index_.assign(n, kNone);
  for (FlatConnection& connection : connections_) {
    if (connection.sender == kNone || connection.receiver == kNone) {
      check_unpaired(connection);
      continue;
    }
    const FlatBlock& sender = blocks_[connection.sender];
    const FlatBlock& receiver = blocks_[connection.receiver];
    StepId recv = receiver.first;
    auto next_receive = [&] {
      while (recv < receiver.end && !step_receives(steps_[recv]->kind)) ++recv;
      return recv < receiver.end ? recv++ : kNoStep;
    };
    for (StepId send = sender.first; send < sender.end; ++send) {
      if (!step_sends(steps_[send]->kind)) continue;
      const StepId match = next_receive();
      if (match == kNoStep) break;
      matching_receive_[send] = match;
      matching_send_[match] = send;
      message_index_[send] = connection.messages++;
    }
    const std::uint32_t sends = count_steps(sender, step_sends);
    const std::uint32_t receives = count_steps(receiver, step_receives);
    if (sends != receives) fail_unpaired(connection, sends, receives);
  }
}

std::uint32_t FlatSchedule::count_steps(const FlatBlock& block,
                                        bool (*kind_matches)(StepKind)) const {
  std::uint32_t count = 0;
  for (StepId s = block.first; s < block.end; ++s) count += kind_matches(steps_[s]->kind);
  return count;
}

// A connection with a block at one end only is fine as long as that end moves no data.
void FlatSchedule::check_unpaired(const FlatConnection& connection) const {
  const std::uint32_t sends =
      connection.sender == kNone ? 0 : count_steps(blocks_[connection.sender], step_sends);
  const std::uint32_t receives =
      connection.receiver == kNone ? 0 : count_steps(blocks_[connection.receiver], step_receives);
  if (sends != receives) fail_unpaired(connection, sends, receives);
}

void FlatSchedule::fail_unpaired(const FlatConnection& connection, std::uint32_t sends,
                                 std::uint32_t receives) const {
  fail(*schedule_, "rank " + std::to_string(connection.src) + " sends " + std::to_string(sends) +
                       " messages to rank " + std::to_string(connection.dst) + " on channel " +
                       std::to_string(connection.channel) + ", which receives " +
                       std::to_string(receives));
}

}  // namespace optiflow::schedule
