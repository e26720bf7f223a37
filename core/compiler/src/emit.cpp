// The last pass: a routed, ordered plan becomes the schedule IR.
#include <algorithm>
#include <map>
#include <numeric>
#include <tuple>

#include "passes.hpp"

namespace optiflow::compiler::passes {
namespace {

using Index = std::int32_t;

// Which step of each rank last wrote each chunk range, so that reductions into the same
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

struct Placement {
  schedule::StepRef send, recv;
};

// Thread blocks of one rank: one per (send peer, channel) and per (receive peer, channel),
// numbered senders first, then receivers, each by (peer, channel).
struct RankBlocks {
  std::map<std::tuple<bool, Index, Index>, Index> ids;  // (is_recv, peer, channel) -> tb
};

schedule::BufferKind buffer_for(support::Collective collective) {
  return collective == support::Collective::reduce_scatter ? schedule::BufferKind::input
                                                           : schedule::BufferKind::output;
}

}  // namespace

schedule::Schedule emit(const Plan& plan, support::Collective collective, const std::string& name,
                        const std::string& topology_name) {
  const auto n = static_cast<std::size_t>(plan.ranks);
  const auto chunks = static_cast<std::int32_t>(plan.chunks);
  const std::int32_t share = plan.ranks > 0 ? chunks / plan.ranks : 0;
  schedule::Schedule schedule;
  schedule.name = name;
  schedule.collective = collective;
  schedule.ranks = plan.ranks;
  schedule.chunks = chunks;
  schedule.inplace = true;
  schedule.topology = topology_name;
  schedule.programs.resize(n);
  for (schedule::RankProgram& p : schedule.programs) {
    p.input_chunks = collective == support::Collective::all_gather ? 0 : chunks;
    p.output_chunks = collective == support::Collective::reduce_scatter ? share : chunks;
  }

  // Thread blocks, in a stable order.
  std::vector<RankBlocks> blocks(n);
  for (const Transfer& t : plan.transfers) {
    blocks[static_cast<std::size_t>(t.src)].ids[{false, t.dst, t.channel}] = 0;
    blocks[static_cast<std::size_t>(t.dst)].ids[{true, t.src, t.channel}] = 0;
  }
  for (std::size_t r = 0; r < n; ++r) {
    Index next = 0;
    for (auto& [key, id] : blocks[r].ids) {
      id = next++;
      schedule::ThreadBlock tb;
      (std::get<0>(key) ? tb.recv_peer : tb.send_peer) = std::get<1>(key);
      tb.channel = std::get<2>(key);
      schedule.programs[r].tbs.push_back(std::move(tb));
    }
  }

  // Steps in estimated start order; sends and receives of a connection share that order, so
  // the k-th send meets the k-th receive.
  std::vector<Index> by_start(plan.transfers.size());
  std::iota(by_start.begin(), by_start.end(), 0);
  std::stable_sort(by_start.begin(), by_start.end(), [&](Index a, Index b) {
    return plan.transfers[static_cast<std::size_t>(a)].start_us <
           plan.transfers[static_cast<std::size_t>(b)].start_us;
  });
  const schedule::BufferKind buffer = buffer_for(collective);
  std::vector<Placement> placed(plan.transfers.size());
  std::vector<LastWriters> writers(n);
  for (Index index : by_start) {
    const Transfer& t = plan.transfers[static_cast<std::size_t>(index)];
    auto& src_tbs = schedule.programs[static_cast<std::size_t>(t.src)].tbs;
    auto& dst_tbs = schedule.programs[static_cast<std::size_t>(t.dst)].tbs;
    const Index send_tb = blocks[static_cast<std::size_t>(t.src)].ids.at({false, t.dst, t.channel});
    const Index recv_tb = blocks[static_cast<std::size_t>(t.dst)].ids.at({true, t.src, t.channel});
    schedule::Step send{schedule::StepKind::send,
                        buffer,
                        static_cast<std::int32_t>(t.first_chunk),
                        buffer,
                        static_cast<std::int32_t>(t.first_chunk),
                        static_cast<std::int32_t>(t.chunk_count),
                        {},
                        t.route};
    for (Index d : t.deps) send.deps.push_back(placed[static_cast<std::size_t>(d)].recv);
    std::sort(send.deps.begin(), send.deps.end());
    send.deps.erase(std::unique(send.deps.begin(), send.deps.end()), send.deps.end());
    schedule::Step recv = send;
    recv.kind = t.reduce ? schedule::StepKind::recv_reduce_copy : schedule::StepKind::recv;
    recv.route.clear();
    const schedule::StepRef recv_ref{
        recv_tb,
        static_cast<std::int32_t>(dst_tbs[static_cast<std::size_t>(recv_tb)].steps.size())};
    recv.deps = writers[static_cast<std::size_t>(t.dst)].write(
        t.first_chunk, t.first_chunk + t.chunk_count, recv_ref);
    placed[static_cast<std::size_t>(index)] = Placement{
        schedule::StepRef{send_tb, static_cast<std::int32_t>(
                                       src_tbs[static_cast<std::size_t>(send_tb)].steps.size())},
        recv_ref};
    src_tbs[static_cast<std::size_t>(send_tb)].steps.push_back(std::move(send));
    dst_tbs[static_cast<std::size_t>(recv_tb)].steps.push_back(std::move(recv));
  }
  return schedule;
}

}  // namespace optiflow::compiler::passes
