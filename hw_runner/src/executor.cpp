#include "optiflow/hw_runner/executor.hpp"

#include <algorithm>
#include <cstring>

namespace optiflow::hw_runner {
namespace {

using schedule::BufferKind;
using schedule::FlatSchedule;
using schedule::Step;
using schedule::StepId;
using schedule::StepKind;

bool reads_src(StepKind kind) {
  switch (kind) {
    case StepKind::send:
    case StepKind::recv_reduce_copy:
    case StepKind::recv_reduce_send:
    case StepKind::recv_reduce_copy_send:
    case StepKind::copy:
    case StepKind::reduce:
      return true;
    default:
      return false;
  }
}

bool writes_dst(StepKind kind) {
  switch (kind) {
    case StepKind::recv:
    case StepKind::recv_copy_send:
    case StepKind::recv_reduce_copy:
    case StepKind::recv_reduce_copy_send:
    case StepKind::copy:
    case StepKind::reduce:
      return true;
    default:
      return false;
  }
}

void add_into(std::span<Element> dst, std::span<const Element> a, std::span<const Element> b) {
  for (std::size_t i = 0; i < dst.size(); ++i) dst[i] = a[i] + b[i];
}

std::string step_label(const FlatSchedule& flat, StepId id) {
  return "tb " + std::to_string(flat.block_of(id).index) + " step " +
         std::to_string(flat.index_in_block(id)) + " (" +
         std::string(schedule::to_string(flat.step(id).kind)) + ")";
}

}  // namespace

RankExecutor::RankExecutor(const FlatSchedule& flat, std::int32_t rank, RankBuffers& buffers,
                           Transport& transport, ExecutorOptions options)
    : flat_(flat), rank_(rank), buffers_(buffers), transport_(transport), options_(options) {
  options_.slots_per_connection = std::max<std::uint32_t>(options_.slots_per_connection, 1);
  const auto first_block = flat.first_block()[static_cast<std::size_t>(rank)];
  const auto end_block = flat.first_block()[static_cast<std::size_t>(rank) + 1];
  if (first_block < end_block) first_step_ = flat.blocks()[first_block].first;
  StepId end_step = first_step_;
  for (schedule::BlockId id = first_block; id < end_block; ++id) {
    const schedule::FlatBlock& flat_block = flat.blocks()[id];
    BlockState state;
    state.id = id;
    end_step = flat_block.end;
    if (flat_block.recv_connection != schedule::kNone) {
      const schedule::FlatConnection& connection = flat.connections()[flat_block.recv_connection];
      ReceiveQueue queue;
      queue.peer = connection.src;
      queue.channel = connection.channel;
      for (StepId s = flat_block.first; s < flat_block.end; ++s)
        if (schedule::step_receives(flat.step(s).kind)) queue.steps.push_back(s);
      queue.slots.resize(options_.slots_per_connection);
      queue.handles.resize(options_.slots_per_connection);
      queue.arrived.resize(options_.slots_per_connection);
      state.receive_queue = static_cast<std::uint32_t>(queues_.size());
      queues_.push_back(std::move(queue));
    }
    blocks_.push_back(state);
  }
  done_.assign(end_step - first_step_, 0);
  find_direct_receives(end_step);
}

// A receive is posted long before its step runs, so its data may arrive at any time before.
// It may land in place only where no other step of this rank writes those elements and every
// step that reads them runs after it (later in its block, or listing it among its deps);
// addresses, not chunk numbers, so that an in-place input aliasing the output counts. Mapping
// them checks every address once, so that a schedule that was not verified fails with a message
// instead of writing outside its buffers.
void RankExecutor::find_direct_receives(StepId end_step) {
  struct Access {
    const Element *begin, *end;
    StepId step;
    bool writes;
  };
  std::vector<Access> accesses;
  for (StepId s = first_step_; s < end_step; ++s) {
    const Step& step = flat_.step(s);
    if (reads_src(step.kind)) {
      const std::span<Element> src = src_of(step);
      accesses.push_back({src.data(), src.data() + src.size(), s, false});
    }
    if (writes_dst(step.kind)) {
      const std::span<Element> dst = dst_of(step);
      accesses.push_back({dst.data(), dst.data() + dst.size(), s, true});
    }
  }
  auto runs_after = [&](StepId reader, StepId receive) {
    if (flat_.block_id(reader) == flat_.block_id(receive)) return reader > receive;
    return std::ranges::find(flat_.deps(reader), receive) != flat_.deps(reader).end();
  };
  lands_in_place_.assign(end_step - first_step_, nullptr);
  for (StepId s = first_step_; s < end_step; ++s) {
    const Step& step = flat_.step(s);
    if (step.kind != StepKind::recv && step.kind != StepKind::recv_copy_send) continue;
    const std::span<Element> dst = dst_of(step);
    const Element *begin = dst.data(), *end = dst.data() + dst.size();
    const bool alone = std::ranges::none_of(accesses, [&](const Access& a) {
      const bool overlaps = a.step != s && a.begin < end && begin < a.end;
      return overlaps && (a.writes || !runs_after(a.step, s));
    });
    if (alone) lands_in_place_[s - first_step_] = dst.data();
  }
}

std::span<Element> RankExecutor::src_of(const Step& step) {
  return buffers_.chunks(step.src_buf, step.src_off, step.count);
}
std::span<Element> RankExecutor::dst_of(const Step& step) {
  return buffers_.chunks(step.dst_buf, step.dst_off, step.count);
}
std::size_t RankExecutor::bytes_of(const Step& step) const {
  return static_cast<std::size_t>(step.count) * buffers_.layout().chunk_elems * sizeof(Element);
}

void RankExecutor::start() {
  std::ranges::fill(done_, 0);
  blocks_left_ = 0;
  steps_completed_ = 0;
  for (BlockState& block : blocks_) {
    const schedule::FlatBlock& flat_block = flat_.blocks()[block.id];
    block.current = flat_block.first;
    block.phase = Phase::waiting;
    block.holds_slot = false;
    blocks_left_ += flat_block.first < flat_block.end;
  }
  for (ReceiveQueue& queue : queues_) {
    queue.posted = queue.consumed = 0;
    post_receives(queue);
  }
}

void RankExecutor::post_receives(ReceiveQueue& queue) {
  const std::size_t depth = options_.slots_per_connection;
  while (queue.posted < queue.steps.size() && queue.posted - queue.consumed < depth) {
    const std::size_t slot = queue.posted % depth;
    const StepId step = queue.steps[queue.posted];
    const std::size_t bytes = bytes_of(flat_.step(step));
    Element* lands = lands_in_place_[step - first_step_];
    if (lands == nullptr) {
      queue.slots[slot].resize(bytes / sizeof(Element));
      lands = queue.slots[slot].data();
    }
    queue.arrived[slot] = 0;
    queue.handles[slot] = transport_.recv(queue.peer, queue.channel, lands, bytes);
    ++queue.posted;
  }
}

void RankExecutor::release_slot(ReceiveQueue& queue) {
  ++queue.consumed;
  post_receives(queue);
}

bool RankExecutor::ready(BlockState& block) {
  for (StepId dep : flat_.deps(block.current))
    if (!done_[dep - first_step_]) return false;
  if (!schedule::step_receives(flat_.step(block.current).kind)) return true;
  ReceiveQueue& queue = queues_[block.receive_queue];
  const std::size_t slot = queue.consumed % options_.slots_per_connection;
  if (!queue.arrived[slot]) queue.arrived[slot] = transport_.done(queue.handles[slot]);
  return queue.arrived[slot] != 0;
}

void RankExecutor::finish_step(BlockState& block) {
  done_[block.current - first_step_] = 1;
  ++steps_completed_;
  ++block.current;
  block.phase = Phase::waiting;
  if (block.current == flat_.blocks()[block.id].end) --blocks_left_;
}

bool RankExecutor::advance(BlockState& block) {
  const schedule::FlatBlock& flat_block = flat_.blocks()[block.id];
  if (block.current == flat_block.end) return false;
  if (block.phase == Phase::sending) {
    if (!transport_.done(block.send)) return false;
    if (block.holds_slot) release_slot(queues_[block.receive_queue]);
    block.holds_slot = false;
    finish_step(block);
    return true;
  }
  if (!ready(block)) return false;

  const Step& step = flat_.step(block.current);
  ReceiveQueue* queue =
      block.receive_queue == schedule::kNone ? nullptr : &queues_[block.receive_queue];
  std::span<Element> received;
  if (schedule::step_receives(step.kind))
    received = queue->slots[queue->consumed % options_.slots_per_connection];
  const Element* send_from = nullptr;
  switch (step.kind) {
    case StepKind::send:
      send_from = src_of(step).data();
      break;
    case StepKind::recv:
    case StepKind::recv_copy_send: {
      const std::span<Element> dst = dst_of(step);
      if (lands_in_place_[block.current - first_step_] == nullptr)
        std::ranges::copy(received, dst.begin());
      release_slot(*queue);
      if (step.kind == StepKind::recv_copy_send) send_from = dst.data();
      break;
    }
    case StepKind::recv_reduce_copy:
    case StepKind::recv_reduce_copy_send: {
      const std::span<Element> dst = dst_of(step);
      add_into(dst, src_of(step), received);
      release_slot(*queue);
      if (step.kind == StepKind::recv_reduce_copy_send) send_from = dst.data();
      break;
    }
    case StepKind::recv_reduce_send:
      add_into(received, src_of(step), received);
      send_from = received.data();
      block.holds_slot = true;
      break;
    case StepKind::copy: {
      const std::span<Element> src = src_of(step), dst = dst_of(step);
      std::memmove(dst.data(), src.data(), src.size_bytes());
      break;
    }
    case StepKind::reduce: {
      const std::span<Element> dst = dst_of(step);
      add_into(dst, dst, src_of(step));
      break;
    }
    case StepKind::nop:
      break;
  }
  if (send_from == nullptr) {
    finish_step(block);
    return true;
  }
  const schedule::ThreadBlock& tb = flat_.schedule()
                                        .programs[static_cast<std::size_t>(rank_)]
                                        .tbs[static_cast<std::size_t>(flat_block.index)];
  block.send = transport_.send(tb.send_peer, tb.channel, send_from, bytes_of(step));
  block.phase = Phase::sending;
  return true;
}

std::size_t RankExecutor::receives_in_place() const {
  return lands_in_place_.size() -
         static_cast<std::size_t>(std::ranges::count(lands_in_place_, nullptr));
}

bool RankExecutor::progress() {
  for (BlockState& block : blocks_)
    while (advance(block)) {
    }
  return finished();
}

std::string RankExecutor::waiting_on(std::size_t max_lines) const {
  std::string text;
  std::size_t lines = 0, unfinished = 0;
  for (const BlockState& block : blocks_) {
    const schedule::FlatBlock& flat_block = flat_.blocks()[block.id];
    if (block.current == flat_block.end) continue;
    if (++unfinished > max_lines) continue;
    ++lines;
    const schedule::ThreadBlock& tb = flat_.schedule()
                                          .programs[static_cast<std::size_t>(rank_)]
                                          .tbs[static_cast<std::size_t>(flat_block.index)];
    const std::string channel = " on channel " + std::to_string(tb.channel);
    std::string what = step_label(flat_, block.current);
    const auto pending_dep = std::ranges::find_if(
        flat_.deps(block.current), [&](StepId dep) { return !done_[dep - first_step_]; });
    if (block.phase == Phase::sending)
      what += " waits for rank " + std::to_string(tb.send_peer) + " to take message " +
              std::to_string(flat_.message_index(block.current)) + channel;
    else if (pending_dep != flat_.deps(block.current).end())
      what += " waits for its dependency " + step_label(flat_, *pending_dep);
    else if (schedule::step_receives(flat_.step(block.current).kind))
      what += " waits for message " + std::to_string(queues_[block.receive_queue].consumed) +
              " from rank " + std::to_string(tb.recv_peer) + channel;
    else
      what += " is ready";
    text += (text.empty() ? "" : "\n") + what;
  }
  if (unfinished > lines) text += "\n(and " + std::to_string(unfinished - lines) + " more blocks)";
  return text;
}

}  // namespace optiflow::hw_runner
