// NCCL's PAT All-Gather (v2.23.4-1, include/collectives.h PatAGAlgorithm; arXiv:2506.20252):
// Bruck's algorithm with its dimensions reversed, far peers first, so that round k sends all
// 2^k chunks a rank holds to the rank n / 2^(k+1) away: log2(n) rounds. NCCL runs it only with
// one GPU per node; here for a power-of-two number of ranks. And a hierarchical variant that is
// not NCCL's: PAT across nodes on each rail, then a direct exchange inside each node.
#include <algorithm>
#include <bit>

#include "optiflow/baselines/nccl.hpp"
#include "optiflow/support/error.hpp"
#include "schedule_frame.hpp"

namespace optiflow::baselines {
namespace {

using schedule::StepKind;
using schedule::StepRef;

schedule::Schedule all_gather_frame(std::string name, int ranks, const std::string& topology) {
  return schedule_frame(std::move(name), support::Collective::all_gather, ranks, ranks, topology);
}

schedule::Step chunk_move(StepKind kind, int chunk, std::vector<StepRef> deps = {}) {
  return chunk_step(kind, schedule::BufferKind::output, chunk, std::move(deps));
}

// PAT's rounds among `group` (a power of two of ranks, chunk x = rank x's data) for the member
// at `position`, appended to its program as a send and a receive block per round (apart, so
// that no round waits for a full connection's receiver to finish sending). `arrived[x]` is set
// to the receive that brings chunk x; a chunk is sent on once it has arrived.
void add_pat_rounds(schedule::RankProgram& program, const std::vector<int>& group, int position,
                    std::vector<StepRef>& arrived) {
  const int n = static_cast<int>(group.size());
  const auto member = [&](int offset) {
    return group[static_cast<std::size_t>(((position + offset) % n + n) % n)];
  };
  for (int k = 0; (1 << k) < n; ++k) {
    const int distance = n >> (k + 1), stride = n >> k;
    schedule::ThreadBlock send{member(-distance), -1, 0, {}};
    schedule::ThreadBlock recv{-1, member(distance), 0, {}};
    const auto recv_tb = static_cast<std::int32_t>(program.tbs.size() + 1);
    for (int j = 0; j < (1 << k); ++j) {
      const int held = member(j * stride);
      send.steps.push_back(
          chunk_move(StepKind::send, held,
                     j == 0 ? std::vector<StepRef>{} : std::vector<StepRef>{arrived[held]}));
      const int coming = member(distance + j * stride);
      recv.steps.push_back(chunk_move(StepKind::recv, coming));
      arrived[static_cast<std::size_t>(coming)] =
          StepRef{recv_tb, static_cast<std::int32_t>(recv.steps.size() - 1)};
    }
    program.tbs.push_back(std::move(send));
    program.tbs.push_back(std::move(recv));
  }
}

}  // namespace

bool nccl_pat_runs(const NcclRingGraph& graph, support::Collective collective) {
  return collective == support::Collective::all_gather && graph.nodes == graph.ranks &&
         std::has_single_bit(static_cast<unsigned>(graph.ranks));
}

schedule::Schedule nccl_pat_schedule(const NcclRingGraph& graph, support::Collective collective,
                                     const std::string& topology_name) {
  if (!nccl_pat_runs(graph, collective))
    throw support::UnsupportedError(
        support::UnsupportedError::Subject::collective,
        "PAT runs allgather with one GPU per node (NCCL's restriction) on a power-of-two number "
        "of ranks (this baseline's)");
  schedule::Schedule s = all_gather_frame("nccl-pat", graph.ranks, topology_name);
  std::vector<int> everyone(static_cast<std::size_t>(graph.ranks));
  for (int r = 0; r < graph.ranks; ++r) everyone[static_cast<std::size_t>(r)] = r;
  for (int r = 0; r < graph.ranks; ++r) {
    std::vector<StepRef> arrived(static_cast<std::size_t>(graph.ranks));
    add_pat_rounds(s.programs[static_cast<std::size_t>(r)], everyone, r, arrived);
  }
  return s;
}

schedule::Schedule hierarchical_pat_schedule(const topology::Topology& topology,
                                             support::Collective collective) {
  const std::vector<std::vector<int>> hosts = nccl_hosts(topology);
  const std::size_t ppn = hosts.front().size();
  const bool uniform =
      std::all_of(hosts.begin(), hosts.end(), [&](const auto& h) { return h.size() == ppn; });
  if (collective != support::Collective::all_gather || !uniform ||
      !std::has_single_bit(hosts.size()))
    throw support::UnsupportedError(
        support::UnsupportedError::Subject::collective,
        "the hierarchical PAT runs allgather on a power-of-two number of nodes with the same "
        "GPUs per node");
  schedule::Schedule s =
      all_gather_frame("pat-hierarchical", topology.rank_count(), topology.name());
  const auto rail = [&](std::size_t local) {
    std::vector<int> members;
    for (const auto& host : hosts) members.push_back(host[local]);
    return members;
  };
  for (std::size_t h = 0; h < hosts.size(); ++h) {
    for (std::size_t local = 0; local < ppn; ++local) {
      const int r = hosts[h][local];
      auto& program = s.programs[static_cast<std::size_t>(r)];
      std::vector<StepRef> arrived(static_cast<std::size_t>(s.ranks));
      const std::vector<int> mine = rail(local);
      add_pat_rounds(program, mine, static_cast<int>(h), arrived);
      // Inside the node: what the rail gathered, to each peer, and each peer's rail from it.
      for (std::size_t other = 0; other < ppn; ++other) {
        if (other == local) continue;
        const int peer = hosts[h][other];
        schedule::ThreadBlock send{peer, -1, 0, {}};
        for (int x : mine)
          send.steps.push_back(
              chunk_move(StepKind::send, x,
                         x == r ? std::vector<StepRef>{} : std::vector<StepRef>{arrived[x]}));
        schedule::ThreadBlock recv{-1, peer, 0, {}};
        for (int x : rail(other)) recv.steps.push_back(chunk_move(StepKind::recv, x));
        program.tbs.push_back(std::move(send));
        program.tbs.push_back(std::move(recv));
      }
    }
  }
  return s;
}

}  // namespace optiflow::baselines
