// ForestColl-style baseline: every rank's data broadcast (All-Gather), reduced (Reduce-Scatter)
// or both (All-Reduce) over the throughput-optimal spanning-tree packing of the whole topology.
//
// ForestColl (arXiv 2402.06787) removes switches by edge splitting, which keeps the optimal
// rate, and packs k trees per root over the GPUs that remain. topology/tree_packing.hpp reaches
// the same optimal rate directly, with each tree edge a route through the switches (the edge a
// split would leave behind); here each root's trees are rounded to k equal parts of its data
// and pipelined, and the schedule's steps are ordered by one global key so that it cannot
// deadlock: a step depends only on steps with a smaller key, and every connection carries its
// steps in key order.
#include <ClpConfig.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <map>
#include <tuple>

#include "optiflow/baselines/synthesis.hpp"
#include "optiflow/support/error.hpp"
#include "optiflow/support/strings.hpp"
#include "optiflow/topology/routing.hpp"
#include "optiflow/topology/tree_packing.hpp"
#include "schedule_frame.hpp"

namespace optiflow::baselines {
namespace {

using schedule::StepKind;
using schedule::StepRef;

constexpr int kPipeline = 4;  // each part is sent as this many chunks, one after another

// One hop of one chunk along one tree edge (child to parent when reducing).
struct Hop {
  double progress = 0;     // how far through its tree's chunks, in (0, 1)
  int level = 0;           // along its chunk's path: leaves' edges first when reducing
  int phase = 0;           // 0: reduce toward the root, 1: broadcast from it
  int root = 0, tree = 0;  // ties, for determinism
  int chunk = 0;
  int from = 0, to = 0;
  const std::vector<topology::NodeId>* path = nullptr;
  bool reversed = false;
  auto key() const { return std::tie(progress, level, phase, root, tree, chunk, from, to); }
};

class ForestBuilder {
 public:
  ForestBuilder(const topology::Topology& topology, support::Collective collective, int chunks)
      : topology_(topology),
        router_(topology),
        buffer_(frame_buffer(collective)),
        schedule_(schedule_frame("forestcoll", collective, topology.rank_count(), chunks,
                                 topology.name())),
        sent_(static_cast<std::size_t>(topology.rank_count())),
        received_(static_cast<std::size_t>(topology.rank_count())) {}

  void add(const Hop& hop) {
    const bool reducing = hop.phase == 0;
    std::vector<StepRef> send_deps =
        reducing ? reduced(hop.from, hop.chunk) : std::vector<StepRef>{};
    if (!reducing)
      if (auto it = received_[at(hop.from)].find(hop.chunk); it != received_[at(hop.from)].end())
        send_deps = it->second;
    const int channel = channel_for(hop.from, hop.to, send_deps);
    const StepRef send =
        append(hop.from, hop.to, channel, true,
               chunk_step(StepKind::send, buffer_, hop.chunk, std::move(send_deps), route(hop)));
    sent_[at(hop.from)][hop.chunk] = send;
    // A reduction adds into what the previous one left (one after another); a broadcast
    // overwrites what this rank sent toward the root, once that has left.
    std::vector<StepRef> recv_deps = reducing ? reduced(hop.to, hop.chunk) : std::vector<StepRef>{};
    if (!reducing)
      if (auto it = sent_[at(hop.to)].find(hop.chunk); it != sent_[at(hop.to)].end())
        recv_deps.push_back(it->second);
    const StepKind kind = reducing ? StepKind::recv_reduce_copy : StepKind::recv;
    const StepRef recv = append(hop.to, hop.from, channel, false,
                                chunk_step(kind, buffer_, hop.chunk, std::move(recv_deps)));
    auto& got = received_[at(hop.to)][hop.chunk];
    if (!reducing) got.clear();
    got.push_back(recv);
  }

  schedule::Schedule take() { return std::move(schedule_); }

 private:
  static std::size_t at(int i) { return static_cast<std::size_t>(i); }

  // Sends to one peer that wait on the same receiving thread block share a channel (own data
  // has one of its own): their data arrives in the order they are queued, so a connection
  // never holds a ready chunk behind one still on its way.
  int channel_for(int rank, int peer, const std::vector<StepRef>& deps) {
    const int feed = deps.empty() ? -1 : deps.back().tb;
    auto& feeds = feeds_[{rank, peer}];
    const auto it = std::find(feeds.begin(), feeds.end(), feed);
    if (it != feeds.end()) return static_cast<int>(it - feeds.begin());
    feeds.push_back(feed);
    return static_cast<int>(feeds.size() - 1);
  }

  // The last reduction into `chunk` on `rank` (the others come before it).
  std::vector<StepRef> reduced(int rank, int chunk) const {
    const auto it = received_[at(rank)].find(chunk);
    if (it == received_[at(rank)].end()) return {};
    return {it->second.back()};
  }

  std::vector<topology::LinkId> route(const Hop& hop) {
    std::vector<topology::NodeId> nodes = *hop.path;
    if (hop.reversed) std::reverse(nodes.begin(), nodes.end());
    std::vector<topology::LinkId> links = router_.links_along(nodes);
    if (links.empty())
      throw support::InputError(
          support::SourceLocation{topology_.name(), 0, 0, "links"},
          "forestcoll: no link back along a tree edge from rank " + std::to_string(hop.from) +
              " to rank " + std::to_string(hop.to) + " (reducing runs the trees backwards)");
    return links;
  }

  // The step on `rank`'s thread block toward `peer` (one block per peer and direction).
  StepRef append(int rank, int peer, int channel, bool sends, schedule::Step step) {
    auto& blocks = schedule_.programs[at(rank)].tbs;
    auto [it, inserted] = block_of_.try_emplace(std::make_tuple(rank, peer, channel, sends),
                                                static_cast<int>(blocks.size()));
    if (inserted) {
      schedule::ThreadBlock tb;
      (sends ? tb.send_peer : tb.recv_peer) = peer;
      tb.channel = channel;
      blocks.push_back(std::move(tb));
    }
    auto& steps = blocks[at(it->second)].steps;
    steps.push_back(std::move(step));
    return StepRef{it->second, static_cast<std::int32_t>(steps.size() - 1)};
  }

  const topology::Topology& topology_;
  topology::Router router_;
  schedule::BufferKind buffer_;
  schedule::Schedule schedule_;
  std::map<std::tuple<int, int, int, bool>, int> block_of_;
  std::map<std::pair<int, int>, std::vector<int>> feeds_;
  std::vector<std::vector<StepRef>> recent_;                   // per (rank, peer): by channel
  std::vector<std::map<int, StepRef>> sent_;                   // per rank: last send of a chunk
  std::vector<std::map<int, std::vector<StepRef>>> received_;  // per rank: receives of a chunk
};

}  // namespace

Synthesized forestcoll_synthesize(const topology::Topology& topology,
                                  support::Collective collective, const SynthesisOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  const int n = topology.rank_count();
  if (n < 2)
    throw support::InputError(support::SourceLocation{topology.name(), 0, 0, "gpus"},
                              "forestcoll needs at least two GPUs");
  std::vector<int> everyone(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) everyone[static_cast<std::size_t>(r)] = r;
  if (options.progress)
    options.progress("forestcoll: packing spanning trees over " + std::to_string(n) + " GPUs");
  const topology::TreePacking packing = topology::pack_spanning_trees(topology, everyone);

  const int per_rank = topology::kPackParts * kPipeline;
  const bool reduces = collective != support::Collective::all_gather;
  const bool broadcasts = collective != support::Collective::reduce_scatter;
  std::vector<Hop> hops;
  for (int root = 0; root < n; ++root) {
    const auto& trees = packing.trees[static_cast<std::size_t>(root)];
    int first = root * per_rank;  // the root's slice, cut tree by tree
    for (std::size_t t = 0; t < trees.size(); ++t) {
      const int count = trees[t].parts * kPipeline;
      const auto& edges = trees[t].edges;
      int height = 0;
      for (const topology::PackedEdge& e : edges) height = std::max(height, e.depth);
      for (int j = 0; j < count; ++j) {
        // Each tree's chunks spread evenly over the run, so that every link carries its
        // trees' data at the rates the packing gives them.
        const double progress = (j + 0.5) / count;
        const int tree = static_cast<int>(t);
        for (const topology::PackedEdge& e : edges) {
          if (reduces)
            hops.push_back(Hop{progress, height - e.depth, 0, root, tree, first + j, e.to_rank,
                               e.from_rank, &e.path, true});
          if (broadcasts)
            hops.push_back(Hop{progress, (reduces ? height : 0) + e.depth, 1, root, tree, first + j,
                               e.from_rank, e.to_rank, &e.path, false});
        }
      }
      first += count;
    }
  }
  std::sort(hops.begin(), hops.end(), [](const Hop& a, const Hop& b) { return a.key() < b.key(); });

  ForestBuilder builder(topology, collective, n * per_rank);
  for (const Hop& hop : hops) builder.add(hop);
  Synthesized result;
  result.schedule = builder.take();
  std::size_t tree_count = 0;
  for (const auto& trees : packing.trees) tree_count += trees.size();
  result.notes = {
      support::strprintf("spanning-tree packing at %.3f GB/s per rank (the cut bound's rate), "
                         "%zu weighted trees over %d roots in %d column-generation rounds",
                         packing.rate_GBps, tree_count, n, packing.iterations),
      support::strprintf("each root's data in %d equal parts over its trees (the rounding "
                         "keeps %.1f%% of the rate), each part pipelined in %d chunks",
                         topology::kPackParts,
                         100.0 * packing.rounded_rate_GBps / packing.rate_GBps, kPipeline)};
  if (collective != support::Collective::all_gather)
    result.notes.push_back("reductions run the same trees backwards, toward each root");
  result.solver.solver = std::string("CLP ") + CLP_VERSION;
  result.solver.status = "optimal (column generation converged)";
  result.solver.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace optiflow::baselines
