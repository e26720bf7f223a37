// A brute-force reference for the verifier's tests, written without its model: it runs the
// runtime semantics of docs/schedule-ir.md ("Execution": per-block program counters, deps, FIFO
// message queues) in every interleaving, memoized on the set of completed steps, on values
// (chunk, contributing ranks). Two steps whose accesses to a chunk conflict (one writes) race
// when some reachable state has both ready to run at once. Exponential: small schedules only.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "optiflow/schedule/schedule.hpp"

namespace optiflow::schedule::testing_support {

using LabelPair = std::pair<std::string, std::string>;  // "rank R tb T step S (kind)"

inline LabelPair sorted_pair(std::string a, std::string b) {
  if (b < a) std::swap(a, b);
  return {std::move(a), std::move(b)};
}

// (chunk, contributing ranks as bits); chunk -1 is "holds nothing", -2 "result of an error".
struct Value {
  int chunk = -1;
  std::uint64_t ranks = 0;
  bool operator==(const Value&) const = default;
  bool valid() const { return chunk >= 0; }
};

struct Verdict {
  bool too_big = false;
  bool deadlock = false;
  bool erroneous = false;  // some execution reads nothing, adds wrongly, or misses the result
  bool values_depend_on_order = false;
  std::set<LabelPair> races;
  std::size_t states = 0;

  bool clean() const { return races.empty() && !deadlock && !erroneous; }
};

class BruteForce {
 public:
  /// Explores at most `max_states` states; past that the verdict says too_big.
  BruteForce(const Schedule& schedule, std::size_t max_states)
      : schedule_(schedule), max_states_(max_states) {
    lay_out_memory();
    index_blocks();
  }

  Verdict run() {
    Machine start;
    start.pcs.assign(blocks_.size(), 0);
    start.memory = initial_memory();
    start.queues.resize(queue_count_);
    explore(start);  // it runs every interleaving on this one machine, undoing each step
    verdict_.states = seen_.size();
    return verdict_;
  }

 private:
  struct Block {
    int rank = 0;
    int tb = 0;
    const ThreadBlock* code = nullptr;
    int send_queue = -1;
    int recv_queue = -1;
  };
  struct Machine {
    std::vector<int> pcs;  // per block: steps completed; the state
    std::vector<Value> memory;
    std::vector<std::deque<std::vector<Value>>> queues;  // per connection: messages in flight
  };
  // What a step changed, so that the next interleaving can start from the state before it.
  struct Undo {
    int block = 0;
    std::vector<std::pair<int, Value>> overwritten;  // slot, old value
    bool received = false;
    std::vector<Value> message;  // the message it took, when received
    bool sent = false;
  };
  struct Memory {
    int input = 0, output = 0, scratch = 0;  // first slots
  };

  // docs/schedule-ir.md: in place, All-Gather's input is the rank's slice of its output,
  // Reduce-Scatter's output the rank's slice of its input, All-Reduce's input its output.
  void lay_out_memory() {
    const int n = schedule_.ranks, chunks = schedule_.chunks, slice = chunks / n;
    const bool gathers = schedule_.collective == support::Collective::all_gather;
    const bool scatters = schedule_.collective == support::Collective::reduce_scatter;
    input_size_ = gathers ? slice : chunks;
    output_size_ = scatters ? slice : chunks;
    int next = 0;
    for (int r = 0; r < n; ++r) {
      Memory m;
      if (!schedule_.inplace) {
        m.input = next;
        m.output = next + input_size_;
        next += input_size_ + output_size_;
      } else if (gathers) {
        m.output = next;
        m.input = next + r * slice;
        next += output_size_;
      } else {
        m.input = next;
        m.output = next + (scatters ? r * slice : 0);
        next += input_size_;
      }
      m.scratch = next;
      next += schedule_.programs[static_cast<std::size_t>(r)].scratch_chunks;
      memory_.push_back(m);
    }
    slot_count_ = next;
  }

  int address(int rank, BufferKind buffer, int chunk) const {
    const Memory& m = memory_[static_cast<std::size_t>(rank)];
    switch (buffer) {
      case BufferKind::input:
        return m.input + chunk;
      case BufferKind::output:
        return m.output + chunk;
      case BufferKind::scratch:
        return m.scratch + chunk;
    }
    return -1;
  }

  void index_blocks() {
    std::map<std::tuple<int, int, int>, int> queues;
    auto queue = [&](int src, int dst, int channel) {
      return queues.try_emplace({src, dst, channel}, static_cast<int>(queues.size())).first->second;
    };
    for (int r = 0; r < schedule_.ranks; ++r) {
      const auto& tbs = schedule_.programs[static_cast<std::size_t>(r)].tbs;
      first_block_.push_back(static_cast<int>(blocks_.size()));
      for (std::size_t t = 0; t < tbs.size(); ++t) {
        Block block{r, static_cast<int>(t), &tbs[t]};
        if (tbs[t].send_peer >= 0) block.send_queue = queue(r, tbs[t].send_peer, tbs[t].channel);
        if (tbs[t].recv_peer >= 0) block.recv_queue = queue(tbs[t].recv_peer, r, tbs[t].channel);
        blocks_.push_back(block);
      }
    }
    queue_count_ = queues.size();
  }

  std::vector<Value> initial_memory() const {
    std::vector<Value> memory(static_cast<std::size_t>(slot_count_));
    const int slice = schedule_.chunks / schedule_.ranks;
    const bool gathers = schedule_.collective == support::Collective::all_gather;
    for (int r = 0; r < schedule_.ranks; ++r)
      for (int j = 0; j < input_size_; ++j)
        memory[static_cast<std::size_t>(address(r, BufferKind::input, j))] =
            Value{gathers ? r * slice + j : j, std::uint64_t{1} << r};
    return memory;
  }

  const Step& step_at(int block, int pc) const {
    return blocks_[static_cast<std::size_t>(block)].code->steps[static_cast<std::size_t>(pc)];
  }
  std::string label(int block, int pc) const {
    const Block& b = blocks_[static_cast<std::size_t>(block)];
    return "rank " + std::to_string(b.rank) + " tb " + std::to_string(b.tb) + " step " +
           std::to_string(pc) + " (" + std::string(to_string(step_at(block, pc).kind)) + ")";
  }

  bool ready(const Machine& m, int block) const {
    const Block& b = blocks_[static_cast<std::size_t>(block)];
    const int pc = m.pcs[static_cast<std::size_t>(block)];
    if (pc >= static_cast<int>(b.code->steps.size())) return false;
    const Step& step = step_at(block, pc);
    for (const StepRef& dep : step.deps)
      if (m.pcs[static_cast<std::size_t>(first_block_[static_cast<std::size_t>(b.rank)] +
                                         dep.tb)] <= dep.step)
        return false;
    return !step_receives(step.kind) ||
           (b.recv_queue >= 0 && !m.queues[static_cast<std::size_t>(b.recv_queue)].empty());
  }

  // The slots a step reads and writes (docs/schedule-ir.md's table).
  std::vector<std::pair<int, bool>> accesses(int block, int pc) const {
    const Step& step = step_at(block, pc);
    const int rank = blocks_[static_cast<std::size_t>(block)].rank;
    const StepKind k = step.kind;
    const bool reads_src =
        k == StepKind::send || k == StepKind::recv_reduce_copy || k == StepKind::recv_reduce_send ||
        k == StepKind::recv_reduce_copy_send || k == StepKind::copy || k == StepKind::reduce;
    const bool writes_dst =
        k == StepKind::recv || k == StepKind::recv_copy_send || k == StepKind::recv_reduce_copy ||
        k == StepKind::recv_reduce_copy_send || k == StepKind::copy || k == StepKind::reduce;
    std::vector<std::pair<int, bool>> result;
    for (int i = 0; i < step.count; ++i) {
      if (reads_src) result.emplace_back(address(rank, step.src_buf, step.src_off + i), false);
      if (k == StepKind::reduce)
        result.emplace_back(address(rank, step.dst_buf, step.dst_off + i), false);
      if (writes_dst) result.emplace_back(address(rank, step.dst_buf, step.dst_off + i), true);
    }
    return result;
  }

  bool conflict(int a_block, int a_pc, int b_block, int b_pc) const {
    if (blocks_[static_cast<std::size_t>(a_block)].rank !=
        blocks_[static_cast<std::size_t>(b_block)].rank)
      return false;
    for (const auto& [slot_a, writes_a] : accesses(a_block, a_pc))
      for (const auto& [slot_b, writes_b] : accesses(b_block, b_pc))
        if (slot_a == slot_b && (writes_a || writes_b)) return true;
    return false;
  }

  Value read(const Machine& m, int slot) {
    const Value value = m.memory[static_cast<std::size_t>(slot)];
    if (value.chunk == -1) verdict_.erroneous = true;
    return value.valid() ? value : Value{-2, 0};
  }

  Value add(Value a, Value b) {
    if (!a.valid() || !b.valid()) return Value{-2, 0};
    if (a.chunk != b.chunk || (a.ranks & b.ranks) != 0) {
      verdict_.erroneous = true;
      return Value{-2, 0};
    }
    return Value{a.chunk, a.ranks | b.ranks};
  }

  bool in_output(int rank, int slot) const {
    const int first = memory_[static_cast<std::size_t>(rank)].output;
    return slot >= first && slot < first + output_size_;
  }

  void write(Machine& m, int rank, int slot, Value value, Undo& undo) {
    Value& old = m.memory[static_cast<std::size_t>(slot)];
    undo.overwritten.emplace_back(slot, old);
    // In All-Gather an output chunk has one right value: replacing it is an error.
    if (schedule_.collective == support::Collective::all_gather && in_output(rank, slot) &&
        old.valid() && value.valid() && !(old == value))
      verdict_.erroneous = true;
    old = value;
  }

  void execute(Machine& m, int block, Undo& undo) {
    const Block& b = blocks_[static_cast<std::size_t>(block)];
    undo.block = block;
    const int pc = m.pcs[static_cast<std::size_t>(block)]++;
    const Step& step = step_at(block, pc);
    const StepKind k = step.kind;
    if (k == StepKind::nop) return;
    std::vector<Value> received(static_cast<std::size_t>(step.count), Value{-2, 0});
    if (step_receives(k)) {
      auto& queue = m.queues[static_cast<std::size_t>(b.recv_queue)];
      if (queue.front().size() == received.size())
        received = queue.front();
      else
        verdict_.erroneous = true;
      undo.received = true;
      undo.message = std::move(queue.front());
      queue.pop_front();
    }
    std::vector<Value> stored, sent;
    for (int i = 0; i < step.count; ++i) {
      const int src = address(b.rank, step.src_buf, step.src_off + i);
      const int dst = address(b.rank, step.dst_buf, step.dst_off + i);
      const Value in = received[static_cast<std::size_t>(i)];
      switch (k) {
        case StepKind::send:
          sent.push_back(read(m, src));
          break;
        case StepKind::recv:
          stored.push_back(in);
          break;
        case StepKind::recv_copy_send:
          stored.push_back(in);
          sent.push_back(in);
          break;
        case StepKind::recv_reduce_copy:
          stored.push_back(add(read(m, src), in));
          break;
        case StepKind::recv_reduce_send:
          sent.push_back(add(read(m, src), in));
          break;
        case StepKind::recv_reduce_copy_send:
          stored.push_back(add(read(m, src), in));
          sent.push_back(stored.back());
          break;
        case StepKind::copy:
          stored.push_back(read(m, src));
          break;
        case StepKind::reduce:
          stored.push_back(add(read(m, dst), read(m, src)));
          break;
        case StepKind::nop:
          break;
      }
    }
    for (std::size_t i = 0; i < stored.size(); ++i)
      write(m, b.rank, address(b.rank, step.dst_buf, step.dst_off + static_cast<int>(i)), stored[i],
            undo);
    undo.sent = step_sends(k);
    if (undo.sent) m.queues[static_cast<std::size_t>(b.send_queue)].push_back(std::move(sent));
  }

  void revert(Machine& m, Undo& undo) {
    const Block& b = blocks_[static_cast<std::size_t>(undo.block)];
    if (undo.sent) m.queues[static_cast<std::size_t>(b.send_queue)].pop_back();
    for (auto it = undo.overwritten.rbegin(); it != undo.overwritten.rend(); ++it)
      m.memory[static_cast<std::size_t>(it->first)] = it->second;
    if (undo.received)
      m.queues[static_cast<std::size_t>(b.recv_queue)].push_front(std::move(undo.message));
    --m.pcs[static_cast<std::size_t>(undo.block)];
  }

  void check_final(const Machine& m) {
    for (const auto& queue : m.queues)
      if (!queue.empty()) verdict_.erroneous = true;
    const int n = schedule_.ranks, slice = schedule_.chunks / n;
    const std::uint64_t everyone = n == 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << n) - 1;
    for (int r = 0; r < n; ++r)
      for (int c = 0; c < output_size_; ++c) {
        Value expected{c, everyone};
        if (schedule_.collective == support::Collective::all_gather)
          expected = Value{c, std::uint64_t{1} << (c / slice)};
        else if (schedule_.collective == support::Collective::reduce_scatter)
          expected.chunk = r * slice + c;
        if (!(m.memory[static_cast<std::size_t>(address(r, BufferKind::output, c))] == expected))
          verdict_.erroneous = true;
      }
  }

  static std::uint64_t fingerprint(const Machine& m) {
    std::uint64_t hash = 1469598103934665603ull;
    auto mix = [&](std::uint64_t word) { hash = (hash ^ word) * 1099511628211ull; };
    for (const Value& v : m.memory) mix(static_cast<std::uint64_t>(v.chunk + 2) << 40 ^ v.ranks);
    for (const auto& queue : m.queues)
      for (const auto& message : queue) {
        mix(message.size());
        for (const Value& v : message) mix(static_cast<std::uint64_t>(v.chunk + 2) << 40 ^ v.ranks);
      }
    return hash;
  }

  void explore(Machine& m) {
    const auto [seen, fresh] = seen_.try_emplace(m.pcs, fingerprint(m));
    if (!fresh) {
      if (seen->second != fingerprint(m)) verdict_.values_depend_on_order = true;
      return;
    }
    if (seen_.size() > max_states_) verdict_.too_big = true;
    if (verdict_.too_big) return;
    std::vector<int> runnable;
    for (int b = 0; b < static_cast<int>(blocks_.size()); ++b)
      if (ready(m, b)) runnable.push_back(b);
    for (std::size_t i = 0; i < runnable.size(); ++i)
      for (std::size_t j = i + 1; j < runnable.size(); ++j) {
        const int a = runnable[i], b = runnable[j];
        const int a_pc = m.pcs[static_cast<std::size_t>(a)],
                  b_pc = m.pcs[static_cast<std::size_t>(b)];
        if (conflict(a, a_pc, b, b_pc))
          verdict_.races.insert(sorted_pair(label(a, a_pc), label(b, b_pc)));
      }
    if (runnable.empty()) {
      bool finished = true;
      for (std::size_t b = 0; b < blocks_.size(); ++b)
        finished = finished && m.pcs[b] == static_cast<int>(blocks_[b].code->steps.size());
      if (finished)
        check_final(m);
      else
        verdict_.deadlock = true;
      return;
    }
    for (int b : runnable) {
      Undo undo;
      execute(m, b, undo);
      explore(m);
      revert(m, undo);
    }
  }

  struct PcsHash {
    std::size_t operator()(const std::vector<int>& pcs) const {
      std::size_t hash = 0;
      for (int pc : pcs) hash = hash * 131 + static_cast<std::size_t>(pc);
      return hash;
    }
  };

  const Schedule& schedule_;
  std::size_t max_states_;
  std::vector<Memory> memory_;
  int input_size_ = 0, output_size_ = 0, slot_count_ = 0;
  std::vector<Block> blocks_;
  std::vector<int> first_block_;  // per rank
  std::size_t queue_count_ = 0;
  std::unordered_map<std::vector<int>, std::uint64_t, PcsHash> seen_;
  Verdict verdict_;
};

}  // namespace optiflow::schedule::testing_support
