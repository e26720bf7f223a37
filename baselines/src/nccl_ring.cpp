// The schedules of NCCL's ring collectives: every rank's data cut into one chunk per channel;
// on channel c the rank at ring position p runs one thread block to its successor, step by
// step as NCCL's ring kernels do:
//   All-Gather:     send its chunk, N-2 receive-and-forward, receive;
//   Reduce-Scatter: send the chunk for its predecessor, N-2 receive-add-forward, receive-add
//                   its own;
//   All-Reduce:     the Reduce-Scatter, whose last step forwards the reduced chunk, then the
//                   All-Gather's N-2 receive-and-forward and receive.
#include "optiflow/baselines/nccl.hpp"
#include "optiflow/support/error.hpp"
#include "schedule_frame.hpp"

namespace optiflow::baselines {
namespace {

using schedule::BufferKind;
using schedule::StepKind;

// The kinds and chunk owners (as offsets from the block's ring position) of one ring block.
std::vector<std::pair<StepKind, int>> ring_steps(support::Collective collective, int n) {
  std::vector<std::pair<StepKind, int>> steps;
  const auto all_gather = [&] {
    for (int j = 1; j < n - 1; ++j) steps.emplace_back(StepKind::recv_copy_send, -j);
    steps.emplace_back(StepKind::recv, -(n - 1));
  };
  if (collective == support::Collective::all_gather) {
    steps.emplace_back(StepKind::send, 0);
    all_gather();
    return steps;
  }
  steps.emplace_back(StepKind::send, -1);
  for (int j = 1; j < n - 1; ++j) steps.emplace_back(StepKind::recv_reduce_send, -1 - j);
  if (collective == support::Collective::reduce_scatter) {
    steps.emplace_back(StepKind::recv_reduce_copy, 0);
    return steps;
  }
  steps.emplace_back(StepKind::recv_reduce_copy_send, 0);
  all_gather();
  return steps;
}

}  // namespace

schedule::Schedule nccl_ring_schedule(const NcclRingGraph& graph, support::Collective collective,
                                      const std::string& topology_name) {
  const bool supported = collective == support::Collective::all_gather ||
                         collective == support::Collective::reduce_scatter ||
                         collective == support::Collective::all_reduce;
  if (!supported)
    throw support::UnsupportedError(support::UnsupportedError::Subject::collective,
                                    "NCCL's rings are built for allgather, reducescatter and "
                                    "allreduce; not " +
                                        std::string(to_string(collective)));
  const int n = graph.ranks, channels = graph.channels;
  schedule::Schedule s = schedule_frame("nccl-ring", collective, n, n * channels, topology_name);
  const BufferKind buffer = frame_buffer(collective);
  const auto steps = ring_steps(collective, n);
  // Rank r's data is chunks [r * channels, (r + 1) * channels); channel c carries the c-th.
  for (int c = 0; c < channels; ++c) {
    const std::vector<int>& ring = graph.rings[static_cast<std::size_t>(c)];
    for (int p = 0; p < n; ++p) {
      const auto at = [&](int offset) {
        return ring[static_cast<std::size_t>(((p + offset) % n + n) % n)];
      };
      const std::vector<topology::LinkId>& route =
          graph.routes[static_cast<std::size_t>(c)][static_cast<std::size_t>(p)];
      schedule::ThreadBlock tb;
      tb.send_peer = at(1);
      tb.recv_peer = at(-1);
      tb.channel = c;
      for (const auto& [kind, owner] : steps)
        tb.steps.push_back(chunk_step(kind, buffer, at(owner) * channels + c, {}, route));
      s.programs[static_cast<std::size_t>(at(0))].tbs.push_back(std::move(tb));
    }
  }
  return s;
}

}  // namespace optiflow::baselines
