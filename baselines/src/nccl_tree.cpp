// NCCL's double binary tree for All-Reduce (src/graph/trees.cc, connect.cc; v2.23.4-1): a
// binary tree over the nodes and its mirror (even node counts) or shift by one (odd), half the
// channels on each, and inside a node a chain through its GPUs. Each channel reduces its share
// of the buffer up the tree and broadcasts it back down, in pieces, so the two directions
// pipeline as NCCL's tree kernels do.
#include "optiflow/baselines/nccl.hpp"
#include "optiflow/support/error.hpp"
#include "schedule_frame.hpp"

namespace optiflow::baselines {
namespace {

using schedule::BufferKind;
using schedule::StepKind;
using schedule::StepRef;

// ncclGetBtree: node `rank`'s parent and children in the binary tree over `n` nodes.
struct TreeLinks {
  int up = -1;
  std::vector<int> down;
};

TreeLinks btree(int n, int rank) {
  TreeLinks links;
  int bit = 1;
  while (bit < n && !(bit & rank)) bit <<= 1;
  if (rank == 0) {
    if (n > 1) links.down.push_back(bit >> 1);
    return links;
  }
  links.up = (rank ^ bit) | (bit << 1);
  if (links.up >= n) links.up = rank ^ bit;
  int low = bit >> 1;
  if (low == 0) return links;
  links.down.push_back(rank - low);
  int right = rank + low;
  while (right >= n && low > 0) {
    low >>= 1;
    right = low == 0 ? -1 : rank + low;
  }
  if (right > 0) links.down.push_back(right);
  return links;
}

// The second tree: the mirror image for an even node count, the tree shifted by one for odd.
TreeLinks second_tree(int n, int rank) {
  const bool mirror = n % 2 == 0;
  const auto to = [&](int x) { return mirror ? n - 1 - x : (x - 1 + n) % n; };
  const auto back = [&](int x) { return mirror ? n - 1 - x : (x + 1) % n; };
  TreeLinks inner = btree(n, to(rank));
  TreeLinks links;
  links.up = inner.up < 0 ? -1 : back(inner.up);
  for (int d : inner.down) links.down.push_back(back(d));
  return links;
}

}  // namespace

std::vector<NcclTree> nccl_trees(const NcclRingGraph& graph, const topology::Topology& topology) {
  const std::vector<std::vector<int>> hosts = nccl_hosts(topology);
  const int nodes = static_cast<int>(hosts.size());
  const std::size_t ppn = hosts.front().size();
  std::vector<NcclTree> trees;
  for (int c = 0; c < graph.channels; ++c) {
    NcclTree tree;
    tree.parent.assign(static_cast<std::size_t>(graph.ranks), -1);
    tree.children.assign(static_cast<std::size_t>(graph.ranks), {});
    const std::size_t head = static_cast<std::size_t>(c) % ppn;
    const auto chain = [&](int h, std::size_t i) {
      return hosts[static_cast<std::size_t>(h)][(head + i) % ppn];
    };
    for (int h = 0; h < nodes; ++h) {
      for (std::size_t i = 1; i < ppn; ++i) {
        tree.parent[static_cast<std::size_t>(chain(h, i))] = chain(h, i - 1);
        tree.children[static_cast<std::size_t>(chain(h, i - 1))].push_back(chain(h, i));
      }
      const TreeLinks links = c < graph.channels / 2 ? btree(nodes, h) : second_tree(nodes, h);
      if (links.up >= 0) tree.parent[static_cast<std::size_t>(chain(h, 0))] = chain(links.up, 0);
      for (int d : links.down)
        tree.children[static_cast<std::size_t>(chain(h, 0))].push_back(chain(d, 0));
    }
    trees.push_back(std::move(tree));
  }
  return trees;
}

schedule::Schedule nccl_tree_schedule(const std::vector<NcclTree>& trees, int ranks,
                                      support::Collective collective,
                                      const std::string& topology_name) {
  if (collective != support::Collective::all_reduce)
    throw support::UnsupportedError(
        support::UnsupportedError::Subject::collective,
        "NCCL's tree runs allreduce; not " + std::string(to_string(collective)));
  const int channels = static_cast<int>(trees.size());
  schedule::Schedule s =
      schedule_frame("nccl-tree", collective, ranks, channels * kNcclTreePieces, topology_name);
  constexpr int P = kNcclTreePieces;
  for (int c = 0; c < channels; ++c) {
    const NcclTree& tree = trees[static_cast<std::size_t>(c)];
    for (int r = 0; r < ranks; ++r) {
      auto& tbs = s.programs[static_cast<std::size_t>(r)].tbs;
      const int parent = tree.parent[static_cast<std::size_t>(r)];
      const std::vector<int>& children = tree.children[static_cast<std::size_t>(r)];
      const int first = static_cast<int>(tbs.size());
      const int parent_tb = parent >= 0 ? first : -1;
      const int first_child_tb = first + (parent >= 0 ? 1 : 0);
      const int last_child_tb = first_child_tb + static_cast<int>(children.size()) - 1;
      const auto chunk = [&](int k) { return c * P + k; };
      if (parent >= 0) {
        schedule::ThreadBlock tb{parent, parent, c, {}};
        // Up: send each reduced piece once the last child's share is in; down: receive it.
        for (int k = 0; k < P; ++k)
          tb.steps.push_back(chunk_step(StepKind::send, BufferKind::output, chunk(k),
                                        children.empty()
                                            ? std::vector<StepRef>{}
                                            : std::vector<StepRef>{{last_child_tb, k}}));
        for (int k = 0; k < P; ++k)
          tb.steps.push_back(chunk_step(StepKind::recv, BufferKind::output, chunk(k)));
        tbs.push_back(std::move(tb));
      }
      for (std::size_t j = 0; j < children.size(); ++j) {
        const int me = first_child_tb + static_cast<int>(j);
        schedule::ThreadBlock tb{children[j], children[j], c, {}};
        // Children add in one after another, so no two reductions of a piece race.
        for (int k = 0; k < P; ++k)
          tb.steps.push_back(
              chunk_step(StepKind::recv_reduce_copy, BufferKind::output, chunk(k),
                         j == 0 ? std::vector<StepRef>{} : std::vector<StepRef>{{me - 1, k}}));
        // Down: the piece as the parent sent it back, or, at the root, once it is reduced.
        for (int k = 0; k < P; ++k) {
          std::vector<StepRef> deps;
          if (parent >= 0)
            deps.push_back({parent_tb, P + k});
          else if (me != last_child_tb)
            deps.push_back({last_child_tb, k});
          tb.steps.push_back(
              chunk_step(StepKind::send, BufferKind::output, chunk(k), std::move(deps)));
        }
        tbs.push_back(std::move(tb));
      }
    }
  }
  return s;
}

}  // namespace optiflow::baselines
