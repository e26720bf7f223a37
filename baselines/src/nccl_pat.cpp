// NCCL's PAT All-Gather (v2.23.4-1, include/collectives.h PatAGAlgorithm; arXiv:2506.20252):
// Bruck's algorithm with its dimensions reversed, far peers first, so that round k sends all
// 2^k chunks a rank holds to the rank n / 2^(k+1) away: log2(n) rounds. NCCL runs it only with
// one GPU per node; here for a power-of-two number of ranks.
#include <bit>

#include "optiflow/baselines/nccl.hpp"
#include "optiflow/support/error.hpp"

namespace optiflow::baselines {
namespace {

using schedule::StepKind;
using schedule::StepRef;

schedule::Step chunk_step(StepKind kind, int chunk, std::vector<StepRef> deps = {}) {
  schedule::Step s;
  s.kind = kind;
  s.src_buf = schedule::BufferKind::output;
  s.dst_buf = schedule::BufferKind::output;
  s.src_off = chunk;
  s.dst_off = chunk;
  s.count = 1;
  s.deps = std::move(deps);
  return s;
}

}  // namespace

bool nccl_pat_runs(const NcclRingGraph& graph, support::Collective collective) {
  return collective == support::Collective::all_gather && graph.nodes == graph.ranks &&
         std::has_single_bit(static_cast<unsigned>(graph.ranks));
}

schedule::Schedule nccl_pat_schedule(const NcclRingGraph& graph, support::Collective collective,
                                     const std::string& topology_name) {
  if (!nccl_pat_runs(graph, collective))
    throw support::InputError(
        support::SourceLocation{"command line", 0, 0, "--collective"},
        "PAT runs allgather with one GPU per node (NCCL's restriction) on a power-of-two number "
        "of ranks (this baseline's)");
  const int n = graph.ranks;
  schedule::Schedule s;
  s.name = "nccl-pat";
  s.collective = collective;
  s.ranks = n;
  s.chunks = n;  // chunk x is rank x's data
  s.inplace = true;
  s.topology = topology_name;
  s.programs.resize(static_cast<std::size_t>(n));
  const int rounds = std::countr_zero(static_cast<unsigned>(n));
  for (int r = 0; r < n; ++r) {
    auto& program = s.programs[static_cast<std::size_t>(r)];
    program.output_chunks = n;
    // Per round a sending and a receiving block (apart, so that no round waits for a full
    // connection's receiver to finish sending); a chunk is sent on once its receive is done.
    std::vector<StepRef> arrived(static_cast<std::size_t>(n));
    for (int k = 0; k < rounds; ++k) {
      const int distance = n >> (k + 1), stride = n >> k;
      schedule::ThreadBlock send{(r - distance + n) % n, -1, 0, {}};
      schedule::ThreadBlock recv{-1, (r + distance) % n, 0, {}};
      for (int j = 0; j < (1 << k); ++j) {
        const int held = (r + j * stride) % n;
        send.steps.push_back(chunk_step(StepKind::send, held,
                                        held == r ? std::vector<StepRef>{}
                                                  : std::vector<StepRef>{arrived[held]}));
        const int coming = (r + distance + j * stride) % n;
        recv.steps.push_back(chunk_step(StepKind::recv, coming));
        arrived[static_cast<std::size_t>(coming)] =
            StepRef{2 * k + 1, static_cast<std::int32_t>(recv.steps.size() - 1)};
      }
      program.tbs.push_back(std::move(send));
      program.tbs.push_back(std::move(recv));
    }
  }
  return s;
}

}  // namespace optiflow::baselines
