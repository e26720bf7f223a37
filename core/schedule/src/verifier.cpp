// The schedule verifier (docs/schedule-ir.md, "Verification"): structural checks, then symbolic
// execution of the flattened schedule on values (chunk index, contributing ranks), the race
// analysis over the order it ran in, and the collective's postcondition, chunk by chunk.
#include "optiflow/schedule/verifier.hpp"

#include <deque>
#include <functional>
#include <queue>

#include "verifier_model.hpp"

namespace optiflow::schedule {
namespace {

using namespace verifier_detail;

// ---- Execution ----------------------------------------------------------------------------

// Runs a structurally sound schedule on symbolic values with unbounded connection buffers.
class Executor {
 public:
  Executor(const FlatSchedule& flat, const BufferLayout& layout, Diagnostics& diagnostics)
      : flat_(flat),
        layout_(layout),
        diag_(diagnostics),
        slots_(layout.slot_count, kNoValue),
        writers_(layout.slot_count, kNoStep),
        pending_(flat.step_count(), 0),
        done_(flat.step_count(), false),
        mailboxes_(flat.connections().size()) {
    count_prerequisites();
    load_inputs();
  }

  /// Runs every step that can run, non-receiving steps first and ties by (rank, tb), so that a
  /// missing dependency on a receive shows up as a read of an empty chunk. Returns the count.
  std::size_t run() {
    for (StepId id = 0; id < flat_.step_count(); ++id)
      if (pending_[id] == 0) make_ready(id);
    while (true) {
      auto& queue = !local_ready_.empty() ? local_ready_ : recv_ready_;
      if (queue.empty()) break;
      const StepId id = queue.top();
      queue.pop();
      execute(id);
      complete(id);
    }
    add_read_hints();
    return order_.size();
  }

  /// The steps that ran, in the order they ran: a topological order of the happens-before
  /// graph, as a step runs only after everything it waits for.
  std::span<const StepId> order() const { return order_; }

  /// Reports the steps that never ran, what they wait for, and a wait cycle when there is one.
  void report_deadlock() const;
  void report_unreceived() const;
  void check_postcondition() const;

 private:
  // What one connection holds: the sends not yet received, their values back to back.
  struct Mailbox {
    std::deque<StepId> messages;
    std::deque<ValueId> values;
    std::size_t sent = 0;
  };
  // An empty read whose message gets a hint once execution shows who writes the chunk.
  struct ReadHint {
    std::size_t message = 0;
    std::size_t slot = 0;
    StepId reader = kNoStep;
  };
  using ReadyQueue = std::priority_queue<StepId, std::vector<StepId>, std::greater<>>;

  std::string label(StepId id) const { return step_label(flat_, id); }
  const RankLayout& layout(std::int32_t rank) const {
    return layout_.ranks[static_cast<std::size_t>(rank)];
  }
  std::size_t slot_of(BufferKind buffer, std::int64_t chunk) const {
    return layout_.slot(rank_, buffer, chunk);
  }

  void count_prerequisites();
  void load_inputs();
  void make_ready(StepId id);
  void complete(StepId id);
  void execute(StepId id);
  ValueId compute(const Step& step, std::int32_t i);
  ValueId read(BufferKind buffer, std::int64_t chunk);
  ValueId add(ValueId local, ValueId other, BufferKind buffer, std::int64_t chunk);
  void write(BufferKind buffer, std::int64_t chunk, ValueId value);
  void receive(StepId id);
  void send(StepId id);
  void add_read_hints();

  BlockId blocker(StepId head, const std::vector<StepId>& heads) const;
  std::string wait_text(StepId head, const std::vector<StepId>& heads) const;
  void check_gathered(std::int32_t rank, std::int32_t chunk, ValueId value) const;
  void check_reduced(std::int32_t rank, std::int32_t index, std::int32_t chunk,
                     ValueId value) const;

  const FlatSchedule& flat_;
  const BufferLayout& layout_;
  Diagnostics& diag_;
  ValueTable values_;
  std::vector<ValueId> slots_;
  std::vector<StepId> writers_;        // per slot: the last step that wrote it
  std::vector<std::int32_t> pending_;  // per step: predecessors not yet complete
  std::vector<bool> done_;
  std::vector<Mailbox> mailboxes_;  // per connection
  ReadyQueue local_ready_;
  ReadyQueue recv_ready_;
  std::vector<StepId> order_;
  std::vector<ReadHint> read_hints_;

  // The step being executed, for messages; and scratch space reused across steps.
  StepId current_ = kNoStep;
  std::int32_t rank_ = 0;
  std::vector<ValueId> received_;
  std::vector<ValueId> results_;
  std::vector<RankRange> twice_;
};

// A step waits for its block predecessor, its deps and, if it receives, the matching send; one
// that receives without a matching send waits forever (a deadlock, reported with its cause).
void Executor::count_prerequisites() {
  for (StepId id = 0; id < flat_.step_count(); ++id) pending_[id] = flat_.prerequisite_count(id);
}

void Executor::load_inputs() {
  const Shape& shape = layout_.shape;
  for (std::int32_t rank = 0; rank < shape.ranks; ++rank) {
    const BufferSpan& input = layout(rank)[BufferKind::input];
    for (std::int32_t j = 0; j < input.size; ++j) {
      const std::int32_t chunk = shape.gathers() ? rank * shape.slice + j : j;
      slots_[input.base + static_cast<std::size_t>(j)] = values_.single(chunk, rank);
    }
  }
}

void Executor::make_ready(StepId id) {
  (step_receives(flat_.kind(id)) ? recv_ready_ : local_ready_).push(id);
}

void Executor::complete(StepId id) {
  done_[id] = true;
  order_.push_back(id);
  auto release = [&](StepId next) {
    if (--pending_[next] == 0) make_ready(next);
  };
  if (id + 1 < flat_.block_of(id).end) release(id + 1);
  for (StepId dependent : flat_.dependents(id)) release(dependent);
  if (flat_.matching_receive(id) != kNoStep) release(flat_.matching_receive(id));
}

void Executor::execute(StepId id) {
  const Step& step = flat_.step(id);
  if (step.kind == StepKind::nop) return;
  current_ = id;
  rank_ = flat_.rank_of(id);
  if (step_receives(step.kind)) receive(id);
  results_.clear();
  for (std::int32_t i = 0; i < step.count; ++i) results_.push_back(compute(step, i));
  if (operands(step.kind).writes_dst)
    for (std::int32_t i = 0; i < step.count; ++i)
      write(step.dst_buf, std::int64_t{step.dst_off} + i, results_[static_cast<std::size_t>(i)]);
  if (step_sends(step.kind)) send(id);
}

// The value the step produces for its i-th chunk (what it stores, sends, or both).
ValueId Executor::compute(const Step& step, std::int32_t i) {
  const std::int64_t src = std::int64_t{step.src_off} + i;
  const std::int64_t dst = std::int64_t{step.dst_off} + i;
  const auto nth = static_cast<std::size_t>(i);
  switch (step.kind) {
    case StepKind::send:
    case StepKind::copy:
      return read(step.src_buf, src);
    case StepKind::recv:
    case StepKind::recv_copy_send:
      return received_[nth];
    case StepKind::recv_reduce_copy:
    case StepKind::recv_reduce_send:
    case StepKind::recv_reduce_copy_send:
      return add(read(step.src_buf, src), received_[nth], step.src_buf, src);
    case StepKind::reduce: {
      const ValueId into = read(step.dst_buf, dst);
      return add(into, read(step.src_buf, src), step.dst_buf, dst);
    }
    case StepKind::nop:
      break;
  }
  return kBadValue;
}

ValueId Executor::read(BufferKind buffer, std::int64_t chunk) {
  const std::size_t slot = slot_of(buffer, chunk);
  if (slots_[slot] != kNoValue) return slots_[slot];
  const auto kept = diag_.report(
      [&] { return label(current_) + ": " + chunk_label(buffer, chunk) + " holds no data yet"; });
  if (kept) read_hints_.push_back({*kept, slot, current_});
  // Reported once here; kBadValue keeps the steps downstream from repeating it.
  return kBadValue;
}

ValueId Executor::add(ValueId local, ValueId other, BufferKind buffer, std::int64_t chunk) {
  if (local == kBadValue || other == kBadValue) return kBadValue;
  if (values_.chunk(local) != values_.chunk(other)) {
    diag_.report([&] {
      return label(current_) + ": adds " + values_.describe(other) + " to " +
             values_.describe(local) + " (at " + chunk_label(buffer, chunk) + ")";
    });
    return kBadValue;
  }
  twice_.clear();
  const ValueId sum = values_.add(local, other, twice_);
  if (sum != kBadValue) return sum;
  diag_.report([&] {
    const std::string whose = is_single(twice_)
                                  ? "rank " + std::to_string(twice_[0].begin) + "'s contribution"
                                  : "the contributions of ranks " + format_ranks(twice_);
    return label(current_) + ": adds " + whose + " to chunk " +
           std::to_string(values_.chunk(local)) + " twice (at " + chunk_label(buffer, chunk) + ")";
  });
  return kBadValue;
}

// In All-Gather every output chunk has one right value and data never changes, so replacing a
// value there with a different one is an error even if a later write repairs it: the chunk
// was wrong for a while, which a reader ordered in between would see. (Unordered writes are
// races, reported apart.) Reductions legitimately replace partial sums, and scratch buffers are
// reused freely, so neither is checked.
void Executor::write(BufferKind buffer, std::int64_t chunk, ValueId value) {
  const std::size_t slot = slot_of(buffer, chunk);
  const ValueId old = slots_[slot];
  const bool in_output = layout(rank_)[BufferKind::output].contains(slot);
  if (layout_.shape.gathers() && in_output && old > kBadValue && value > kBadValue &&
      !values_.same(old, value))
    diag_.report([&] {
      return label(current_) + ": overwrites " + chunk_label(buffer, chunk) + ", which holds " +
             values_.describe(old) + ", with " + values_.describe(value);
    });
  slots_[slot] = value;
  writers_[slot] = current_;
}

// FIFO order: the receives of a connection run in block order after their matching sends, so
// the oldest message is this receive's.
void Executor::receive(StepId id) {
  const Step& step = flat_.step(id);
  Mailbox& mailbox = mailboxes_[flat_.block_of(id).recv_connection];
  const StepId sender = mailbox.messages.front();
  const std::int32_t sent = flat_.step(sender).count;
  mailbox.messages.pop_front();
  const auto values_end = mailbox.values.begin() + sent;
  received_.assign(mailbox.values.begin(), values_end);
  mailbox.values.erase(mailbox.values.begin(), values_end);
  if (sent == step.count) return;
  diag_.report([&] {
    return label(current_) + ": receives " + plural(step.count, "chunk") +
           ", but the matching send " + label(sender) + " sent " + plural(sent, "chunk");
  });
  received_.assign(static_cast<std::size_t>(step.count), kBadValue);
}

void Executor::send(StepId id) {
  Mailbox& mailbox = mailboxes_[flat_.block_of(id).send_connection];
  mailbox.messages.push_back(id);
  mailbox.values.insert(mailbox.values.end(), results_.begin(), results_.end());
  ++mailbox.sent;
}

void Executor::add_read_hints() {
  for (const ReadHint& hint : read_hints_) {
    const StepId writer = writers_[hint.slot];
    diag_.append(hint.message,
                 writer == kNoStep || writer == hint.reader
                     ? " (and no other step writes it)"
                     : " (missing dependency on " + label(writer) + ", which writes it?)");
  }
}

// ---- Deadlock -----------------------------------------------------------------------------

// The block a stuck step waits for, when that block is stuck too (kNone when it waits for
// something that can never come). A head's own block predecessor has run, so it waits either
// for a dependency or, with those done, for a message.
BlockId Executor::blocker(StepId head, const std::vector<StepId>& heads) const {
  for (StepId dep : flat_.deps(head))
    if (!done_[dep]) return flat_.block_id(dep);
  const FlatConnection& connection = flat_.connections()[flat_.block_of(head).recv_connection];
  if (connection.sender == kNone || heads[connection.sender] == kNoStep) return kNone;
  return connection.sender;
}

std::string Executor::wait_text(StepId head, const std::vector<StepId>& heads) const {
  for (StepId dep : flat_.deps(head))
    if (!done_[dep]) return label(head) + " waits for " + label(dep) + ", which never runs";
  const std::uint32_t connection_index = flat_.block_of(head).recv_connection;
  const FlatConnection& connection = flat_.connections()[connection_index];
  const std::string src = std::to_string(connection.src);
  const std::string channel = std::to_string(connection.channel);
  std::string text = label(head) + " waits for a message from rank " + src + " on channel " +
                     channel + " that is never sent";
  if (connection.sender == kNone)
    return text + " (rank " + src + " has no thread block sending to rank " +
           std::to_string(connection.dst) + " on channel " + channel + ")";
  const FlatBlock& sender = flat_.blocks()[connection.sender];
  const StepId sender_head = heads[connection.sender];
  if (sender_head == kNoStep)
    return text + " (" + block_label(sender.rank, sender.index) + " finishes after sending " +
           plural(static_cast<std::int64_t>(mailboxes_[connection_index].sent), "message") + ")";
  return text + " (its sender is stuck at " + label(sender_head) + ")";
}

// In the "waits for" graph each stuck block has at most one successor, so a cycle, if any, is
// found by walking from each block once.
std::vector<BlockId> find_cycle(const std::vector<BlockId>& next,
                                const std::vector<StepId>& heads) {
  enum : std::uint8_t { unseen, on_walk, finished };
  std::vector<std::uint8_t> state(next.size(), unseen);
  for (std::size_t start = 0; start < next.size(); ++start) {
    if (heads[start] == kNoStep || state[start] != unseen) continue;
    std::vector<BlockId> walk;
    auto block = static_cast<BlockId>(start);
    while (block != kNone && state[block] == unseen) {
      state[block] = on_walk;
      walk.push_back(block);
      block = next[block];
    }
    if (block != kNone && state[block] == on_walk)
      return {std::find(walk.begin(), walk.end(), block), walk.end()};
    for (BlockId seen : walk) state[seen] = finished;
  }
  return {};
}

void Executor::report_deadlock() const {
  const std::size_t stuck_steps = flat_.step_count() - order_.size();
  if (stuck_steps == 0) return;
  const std::span<const FlatBlock> blocks = flat_.blocks();
  // Blocks run their steps in order, so each block's first step not done is the one waiting.
  std::vector<StepId> heads(blocks.size(), kNoStep);
  for (std::size_t b = 0; b < blocks.size(); ++b)
    for (StepId id = blocks[b].first; id < blocks[b].end && heads[b] == kNoStep; ++id)
      if (!done_[id]) heads[b] = id;
  std::vector<BlockId> next(blocks.size(), kNone);
  std::vector<BlockId> stuck;
  for (std::size_t b = 0; b < blocks.size(); ++b) {
    if (heads[b] == kNoStep) continue;
    next[b] = blocker(heads[b], heads);
    stuck.push_back(static_cast<BlockId>(b));
  }
  diag_.report([&] {
    const std::vector<BlockId> cycle = find_cycle(next, heads);
    // The causes first: blocks waiting for nothing that is stuck, then a cycle's members.
    std::vector<BlockId> examples;
    std::vector<bool> listed(blocks.size(), false);
    auto list = [&](BlockId b) {
      if (examples.size() == kDeadlockExamples || listed[b]) return;
      listed[b] = true;
      examples.push_back(b);
    };
    for (BlockId b : stuck)
      if (next[b] == kNone) list(b);
    for (BlockId b : cycle) list(b);
    for (BlockId b : stuck) list(b);
    std::string text = "deadlock: " + plural(static_cast<std::int64_t>(stuck_steps), "step") +
                       " in " + plural(static_cast<std::int64_t>(stuck.size()), "thread block") +
                       " cannot run";
    for (BlockId b : examples) text += "\n  " + wait_text(heads[b], heads);
    if (stuck.size() > examples.size())
      text += "\n  ... and " + std::to_string(stuck.size() - examples.size()) + " more waiting";
    if (cycle.empty()) return text;
    text += "\n  cycle:";
    for (std::size_t i = 0; i < cycle.size() && i < kCycleStepsShown; ++i)
      text += " " + label(heads[cycle[i]]) + " ->";
    if (cycle.size() > kCycleStepsShown)
      text += " ... (" + plural(static_cast<std::int64_t>(cycle.size()), "thread block") +
              " in all) ->";
    return text + " " + label(heads[cycle.front()]);
  });
}

// One error per connection: its later leftovers have the same cause as the first.
void Executor::report_unreceived() const {
  for (std::size_t c = 0; c < mailboxes_.size(); ++c) {
    const std::deque<StepId>& left = mailboxes_[c].messages;
    if (left.empty()) continue;
    const FlatConnection& connection = flat_.connections()[c];
    diag_.report([&] {
      const std::string dst = std::to_string(connection.dst);
      const std::string channel = std::to_string(connection.channel);
      std::string text = label(left.front()) + ": its message to rank " + dst + " on channel " +
                         channel + " (" + plural(flat_.step(left.front()).count, "chunk") +
                         ") is never received";
      if (left.size() > 1)
        text += ", nor are the " + std::to_string(left.size() - 1) + " sent after it";
      if (connection.receiver == kNone)
        text += " (rank " + dst + " has no thread block receiving from rank " +
                std::to_string(connection.src) + " on channel " + channel + ")";
      return text;
    });
  }
}

// ---- Postcondition ------------------------------------------------------------------------

void Executor::check_postcondition() const {
  const Shape& shape = layout_.shape;
  for (std::int32_t rank = 0; rank < shape.ranks; ++rank) {
    const BufferSpan& output = layout(rank)[BufferKind::output];
    for (std::int32_t index = 0; index < output.size; ++index) {
      const ValueId value = slots_[output.base + static_cast<std::size_t>(index)];
      if (shape.gathers())
        check_gathered(rank, index, value);
      else if (shape.collective == support::Collective::reduce_scatter)
        check_reduced(rank, index, rank * shape.slice + index, value);
      else
        check_reduced(rank, index, index, value);
    }
  }
}

void Executor::check_gathered(std::int32_t rank, std::int32_t chunk, ValueId value) const {
  // Messages are built only for the errors that are kept, as there may be a million.
  const std::int32_t owner = chunk / layout_.shape.slice;
  auto where = [&] {
    return "rank " + std::to_string(rank) + ": output chunk " + std::to_string(chunk);
  };
  if (value == kNoValue) {
    diag_.report([&] {
      return where() + " is missing (expected the data of rank " + std::to_string(owner) +
             ", chunk " + std::to_string(chunk) + ")";
    });
  } else if (value == kBadValue) {
    diag_.report([&] { return where() + " holds invalid data (see the errors above)"; });
  } else if (values_.chunk(value) != chunk ||
             !std::ranges::equal(values_.ranks(value), std::array{RankRange{owner, owner + 1}})) {
    diag_.report([&] {
      return where() + " holds " + values_.describe(value) + ", expected rank " +
             std::to_string(owner) + "'s chunk " + std::to_string(chunk);
    });
  }
}

void Executor::check_reduced(std::int32_t rank, std::int32_t index, std::int32_t chunk,
                             ValueId value) const {
  const std::int32_t ranks = layout_.shape.ranks;
  auto where = [&] {
    return "rank " + std::to_string(rank) + ": output chunk " + std::to_string(index);
  };
  auto expected = [&] { return "the sum over all ranks of chunk " + std::to_string(chunk); };
  if (value == kNoValue) {
    diag_.report([&] { return where() + " is missing (expected " + expected() + ")"; });
  } else if (value == kBadValue) {
    diag_.report([&] { return where() + " holds invalid data (see the errors above)"; });
  } else if (values_.chunk(value) != chunk) {
    diag_.report(
        [&] { return where() + " holds " + values_.describe(value) + ", expected " + expected(); });
  } else if (!std::ranges::equal(values_.ranks(value), std::array{RankRange{0, ranks}})) {
    diag_.report([&] {
      return where() + " sums ranks " + format_ranks(values_.ranks(value)) + ", missing " +
             format_rank_or_ranks(complement(values_.ranks(value), ranks));
    });
  }
}

}  // namespace

std::string VerifyResult::summary() const {
  std::string text;
  for (const std::string& error : errors) {
    if (!text.empty()) text += '\n';
    text += error;
  }
  if (error_count > errors.size())
    text += "\n... and " + std::to_string(error_count - errors.size()) + " more";
  return text;
}

VerifyResult verify_schedule(const Schedule& schedule, const topology::Topology* topology) {
  VerifyResult result;
  Diagnostics diagnostics(result);
  BufferLayout layout;
  if (!check_structure(schedule, topology, diagnostics, layout)) return result;
  // The structure is sound, so flattening cannot fail; unpaired messages are reported below.
  const FlatSchedule flat(schedule, UnpairedMessages::keep);
  Executor executor(flat, layout, diagnostics);
  result.steps_executed = executor.run();
  report_races(flat, layout, executor.order(), diagnostics);
  executor.report_deadlock();
  executor.report_unreceived();
  executor.check_postcondition();
  return result;
}

}  // namespace optiflow::schedule
