// The emit pass: a routed, ordered plan becomes the schedule IR.
#include <algorithm>
#include <map>
#include <numeric>

#include "pass_table.hpp"
#include "radix_sort.hpp"

namespace optiflow::compiler::passes {
namespace {

// Which step of one rank last wrote each chunk range, so that reductions into the same
// chunks happen one after another.
class LastWriters {
 public:
  /// Records that `step` writes [begin, end) and returns the earlier writers it must follow.
  std::vector<schedule::StepRef> write(std::int64_t begin, std::int64_t end,
                                       schedule::StepRef step) {
    std::vector<schedule::StepRef> earlier;
    split_at(begin);
    split_at(end);
    for (auto it = segments_.lower_bound(begin); it != segments_.end() && it->first < end;) {
      earlier.push_back(it->second.writer);
      it = segments_.erase(it);
    }
    segments_[begin] = Segment{end, step};
    std::sort(earlier.begin(), earlier.end());
    earlier.erase(std::unique(earlier.begin(), earlier.end()), earlier.end());
    return earlier;
  }

 private:
  struct Segment {
    std::int64_t end;
    schedule::StepRef writer;
  };
  void split_at(std::int64_t point) {
    auto it = segments_.upper_bound(point);
    if (it == segments_.begin()) return;
    --it;
    if (it->first < point && point < it->second.end) {
      segments_[point] = Segment{it->second.end, it->second.writer};
      it->second.end = point;
    }
  }
  std::map<std::int64_t, Segment> segments_;
};

// A thread block of one rank: one per (send peer, channel) and per (receive peer, channel),
// numbered senders first, then receivers, each by (peer, channel), packed so that numeric
// order is that order.
using BlockKey = std::uint64_t;
BlockKey block_key(bool receives, Index peer, Index channel) {
  return (BlockKey{receives} << 56) | (static_cast<BlockKey>(peer) << 24) |
         static_cast<BlockKey>(channel);
}

// Every rank's thread blocks, ascending by key.
std::vector<std::vector<BlockKey>> thread_blocks(const Plan& plan) {
  std::vector<std::vector<BlockKey>> keys(at(plan.ranks));
  for (const Transfer& t : plan.transfers) {
    keys[at(t.src)].push_back(block_key(false, t.dst, t.channel));
    keys[at(t.dst)].push_back(block_key(true, t.src, t.channel));
  }
  for (auto& rank : keys) {
    std::sort(rank.begin(), rank.end());
    rank.erase(std::unique(rank.begin(), rank.end()), rank.end());
    rank.shrink_to_fit();
  }
  return keys;
}

Index block_of(const std::vector<BlockKey>& keys, BlockKey key) {
  return static_cast<Index>(std::lower_bound(keys.begin(), keys.end(), key) - keys.begin());
}

// Steps per thread block, so that each block's steps are allocated once.
std::vector<std::vector<std::size_t>> steps_per_block(
    const Plan& plan, const std::vector<std::vector<BlockKey>>& blocks) {
  std::vector<std::vector<std::size_t>> counts(blocks.size());
  for (std::size_t r = 0; r < blocks.size(); ++r) counts[r].assign(blocks[r].size(), 0);
  for (const Transfer& t : plan.transfers) {
    ++counts[at(t.src)][at(block_of(blocks[at(t.src)], block_key(false, t.dst, t.channel)))];
    ++counts[at(t.dst)][at(block_of(blocks[at(t.dst)], block_key(true, t.src, t.channel)))];
  }
  return counts;
}

// Transfer indices by estimated start, ties in index order.
std::vector<Index> in_start_order(const Plan& plan) {
  std::vector<KeyedIndex> keyed(plan.transfers.size());
  for (std::size_t t = 0; t < keyed.size(); ++t)
    keyed[t] = {order_bits(plan.transfers[t].start_us), static_cast<Index>(t)};
  radix_sort(keyed);
  std::vector<Index> order(keyed.size());
  for (std::size_t k = 0; k < keyed.size(); ++k) order[k] = keyed[k].index;
  return order;
}

// What emit needs of one transfer. Start order jumps all over the plan; gathering these a block
// at a time in a loop that only copies takes those cache misses many at a time, where the loop
// that builds steps would take them one after another.
struct Emission {
  std::int32_t index, src, dst, channel, route, first_chunk, chunk_count;
  bool reduce;
  std::uint32_t deps_end;  // in the block's dependency list
};

constexpr std::size_t kGatherBlock = std::size_t{1} << 14;

void gather(const Plan& plan, std::span<const Index> order, std::vector<Emission>& out,
            std::vector<Index>& deps) {
  out.clear();
  deps.clear();
  for (Index index : order) {
    const Transfer& t = plan.transfers[at(index)];
    const auto waits = plan.deps[at(index)];
    deps.insert(deps.end(), waits.begin(), waits.end());
    out.push_back(Emission{index, t.src, t.dst, t.channel, t.route,
                           static_cast<std::int32_t>(t.first_chunk),
                           static_cast<std::int32_t>(t.chunk_count), t.reduce,
                           static_cast<std::uint32_t>(deps.size())});
  }
}

// Steps in a rank's receiving blocks (they follow its sending ones).
std::size_t received_count(const std::vector<std::size_t>& counts,
                           const std::vector<BlockKey>& keys) {
  std::size_t total = 0;
  for (std::size_t b = 0; b < keys.size(); ++b)
    if (keys[b] >> 56) total += counts[b];
  return total;
}

schedule::BufferKind buffer_for(support::Collective collective) {
  return collective == support::Collective::reduce_scatter ? schedule::BufferKind::input
                                                           : schedule::BufferKind::output;
}

schedule::Step step_for(const Emission& e, schedule::StepKind kind, schedule::BufferKind buffer) {
  schedule::Step step;
  step.kind = kind;
  step.src_buf = step.dst_buf = buffer;
  step.src_off = step.dst_off = e.first_chunk;
  step.count = e.chunk_count;
  return step;
}

schedule::Step& step_at(schedule::Schedule& schedule, Index rank, schedule::StepRef ref) {
  return schedule.programs[at(rank)].tbs[at(ref.tb)].steps[at(ref.step)];
}

// What one rank receives, in start order.
struct Receive {
  std::int64_t first_chunk, chunk_count;
  schedule::StepRef step;
};

// Whether no two receives write the same chunk (an All-Gather receives each chunk once), from
// a bitmap of the chunks written: linear in the chunks received.
bool disjoint(const std::vector<Receive>& receives, std::int64_t chunks,
              std::vector<std::uint64_t>& written) {
  written.assign(static_cast<std::size_t>(chunks / 64 + 1), 0);
  for (const Receive& receive : receives)
    for (std::int64_t c = receive.first_chunk; c < receive.first_chunk + receive.chunk_count; ++c) {
      std::uint64_t& word = written[static_cast<std::size_t>(c / 64)];
      const std::uint64_t bit = std::uint64_t{1} << (c % 64);
      if (word & bit) return false;
      word |= bit;
    }
  return true;
}

// Receives that write the same chunks of a rank follow each other in start order; each rank's
// receives are taken on their own, so that only one rank's writers are in memory at a time.
void order_writes(std::vector<std::vector<Receive>> into, std::int64_t chunks,
                  schedule::Schedule& schedule) {
  std::vector<std::uint64_t> written;
  for (std::size_t r = 0; r < into.size(); ++r) {
    if (!disjoint(into[r], chunks, written)) {
      LastWriters writers;
      for (const Receive& receive : into[r])
        step_at(schedule, static_cast<Index>(r), receive.step).deps = writers.write(
            receive.first_chunk, receive.first_chunk + receive.chunk_count, receive.step);
    }
    into[r] = {};
  }
}

// The schedule's header and its ranks' buffers, without thread blocks.
schedule::Schedule empty_schedule(const Plan& plan, support::Collective collective,
                                  const std::string& name, const std::string& topology_name) {
  const auto chunks = static_cast<std::int32_t>(plan.chunks);
  const std::int32_t share = plan.ranks > 0 ? chunks / plan.ranks : 0;
  schedule::Schedule schedule;
  schedule.name = name;
  schedule.collective = collective;
  schedule.ranks = plan.ranks;
  schedule.chunks = chunks;
  schedule.inplace = true;
  schedule.topology = topology_name;
  schedule.programs.resize(static_cast<std::size_t>(plan.ranks));
  for (schedule::RankProgram& p : schedule.programs) {
    p.input_chunks = collective == support::Collective::all_gather ? 0 : chunks;
    p.output_chunks = collective == support::Collective::reduce_scatter ? share : chunks;
  }
  return schedule;
}

// Every rank's thread blocks, empty, with room for their steps.
void add_thread_blocks(schedule::Schedule& schedule,
                       const std::vector<std::vector<BlockKey>>& blocks,
                       const std::vector<std::vector<std::size_t>>& counts) {
  for (std::size_t r = 0; r < blocks.size(); ++r)
    for (std::size_t b = 0; b < blocks[r].size(); ++b) {
      const BlockKey key = blocks[r][b];
      schedule::ThreadBlock tb;
      const auto peer = static_cast<std::int32_t>((key >> 24) & 0xffffffffu);
      (key >> 56 ? tb.recv_peer : tb.send_peer) = peer;
      tb.channel = static_cast<std::int32_t>(key & 0xffffffu);
      tb.steps.reserve(counts[r][b]);
      schedule.programs[r].tbs.push_back(std::move(tb));
    }
}

}  // namespace

schedule::Schedule emit(const Plan& plan, support::Collective collective, const std::string& name,
                        const std::string& topology_name) {
  const auto n = static_cast<std::size_t>(plan.ranks);
  schedule::Schedule schedule = empty_schedule(plan, collective, name, topology_name);
  const std::vector<Index> by_start = in_start_order(plan);
  const auto blocks = thread_blocks(plan);
  const auto counts = steps_per_block(plan, blocks);
  add_thread_blocks(schedule, blocks, counts);

  // One pass in start order: each block takes its steps in that order, so the k-th send of a
  // connection meets its k-th receive, and a send depends on the receives that brought its
  // data, which started earlier.
  const schedule::BufferKind buffer = buffer_for(collective);
  std::vector<schedule::StepRef> received_by(plan.transfers.size());
  std::vector<std::vector<Receive>> into(n);
  for (std::size_t r = 0; r < n; ++r) into[r].reserve(received_count(counts[r], blocks[r]));
  std::vector<Emission> emissions;
  std::vector<Index> deps;
  for (std::size_t first = 0; first < by_start.size(); first += kGatherBlock) {
    gather(plan,
           std::span(by_start).subspan(first, std::min(kGatherBlock, by_start.size() - first)),
           emissions, deps);
    std::uint32_t deps_begin = 0;
    for (const Emission& e : emissions) {
      const Index send_tb = block_of(blocks[at(e.src)], block_key(false, e.dst, e.channel));
      const Index recv_tb = block_of(blocks[at(e.dst)], block_key(true, e.src, e.channel));
      auto& send_steps = schedule.programs[at(e.src)].tbs[at(send_tb)].steps;
      auto& recv_steps = schedule.programs[at(e.dst)].tbs[at(recv_tb)].steps;
      const schedule::StepRef recv_ref{recv_tb, static_cast<std::int32_t>(recv_steps.size())};
      schedule::Step send = step_for(e, schedule::StepKind::send, buffer);
      send.deps.reserve(e.deps_end - deps_begin);
      for (; deps_begin < e.deps_end; ++deps_begin)
        send.deps.push_back(received_by[at(deps[deps_begin])]);
      std::sort(send.deps.begin(), send.deps.end());
      send.deps.erase(std::unique(send.deps.begin(), send.deps.end()), send.deps.end());
      const auto& route = plan.routes[at(e.route)];
      send.route.assign(route.begin(), route.end());
      send_steps.push_back(std::move(send));
      recv_steps.push_back(step_for(
          e, e.reduce ? schedule::StepKind::recv_reduce_copy : schedule::StepKind::recv, buffer));
      received_by[at(e.index)] = recv_ref;
      into[at(e.dst)].push_back(Receive{e.first_chunk, e.chunk_count, recv_ref});
    }
  }
  order_writes(std::move(into), plan.chunks, schedule);
  return schedule;
}

void emit_pass(CompileState& state) {
  const std::string name = state.options.name.empty() ? "optiflow" : state.options.name;
  state.result.schedule = emit(state.plan, state.options.collective, name, state.topology.name());
  std::vector<std::pair<std::uint64_t, std::string_view>> named;
  for (const auto& [size, protocol] : state.protocols)
    named.emplace_back(size, topology::to_string(protocol));
  schedule::set_protocol_by_size(state.result.schedule, named);
}

}  // namespace optiflow::compiler::passes
