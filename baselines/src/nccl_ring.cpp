// The schedule of NCCL's ring All-Gather: every rank's data cut into one chunk per channel;
// on channel c, the rank at ring position p sends its own chunk, forwards the N-2 chunks that
// reach it (receive-and-forward), and receives the last, as NCCL's ring kernel does per step.
#include "optiflow/baselines/nccl.hpp"
#include "optiflow/support/error.hpp"

namespace optiflow::baselines {
namespace {

schedule::Step step(schedule::StepKind kind, std::int32_t chunk,
                    const std::vector<topology::LinkId>& route = {}) {
  schedule::Step s;
  s.kind = kind;
  s.src_buf = schedule::BufferKind::output;
  s.dst_buf = schedule::BufferKind::output;
  s.src_off = chunk;
  s.dst_off = chunk;
  s.count = 1;
  if (schedule::step_sends(kind)) s.route = route;
  return s;
}

}  // namespace

schedule::Schedule nccl_ring_schedule(const NcclRingGraph& graph, support::Collective collective,
                                      const std::string& topology_name) {
  if (collective != support::Collective::all_gather)
    throw support::InputError(
        support::SourceLocation{"command line", 0, 0, "--collective"},
        "the NCCL ring baseline builds allgather schedules; not " +
            std::string(to_string(collective)));
  const int n = graph.ranks, channels = graph.channels;
  schedule::Schedule s;
  s.name = "nccl-ring";
  s.collective = collective;
  s.ranks = n;
  s.chunks = n * channels;
  s.inplace = true;
  s.topology = topology_name;
  s.programs.resize(static_cast<std::size_t>(n));
  for (auto& program : s.programs) program.output_chunks = s.chunks;
  // Rank r's data is chunks [r * channels, (r + 1) * channels); channel c carries the c-th.
  const auto chunk_of = [&](int rank, int channel) { return rank * channels + channel; };
  for (int c = 0; c < channels; ++c) {
    const std::vector<int>& ring = graph.rings[static_cast<std::size_t>(c)];
    for (int p = 0; p < n; ++p) {
      const auto at = [&](int offset) {
        return ring[static_cast<std::size_t>(((p + offset) % n + n) % n)];
      };
      schedule::ThreadBlock tb;
      tb.send_peer = at(1);
      tb.recv_peer = at(-1);
      tb.channel = c;
      const std::vector<topology::LinkId>& route =
          graph.routes[static_cast<std::size_t>(c)][static_cast<std::size_t>(p)];
      tb.steps.push_back(step(schedule::StepKind::send, chunk_of(at(0), c), route));
      for (int j = 1; j < n - 1; ++j)
        tb.steps.push_back(step(schedule::StepKind::recv_copy_send, chunk_of(at(-j), c), route));
      tb.steps.push_back(step(schedule::StepKind::recv, chunk_of(at(-(n - 1)), c)));
      s.programs[static_cast<std::size_t>(at(0))].tbs.push_back(std::move(tb));
    }
  }
  return s;
}

}  // namespace optiflow::baselines
