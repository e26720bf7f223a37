// TACCL's topology JSON (github.com/microsoft/taccl, taccl/examples/topo): a node type with
// profiled link costs, read into our topology model plus the figures TACCL's synthesizer uses.
//
// A TACCL file describes one node (gpus_per_node, nics_per_node) and the alpha-beta cost of its
// links: `alpha` and `node_betas_list` / `node_invbws_list` (invbw = alpha + beta) for the links
// inside a node, `remote_alpha`, `remote_beta`, `remote_invbw` for a link between nodes. Costs are
// in microseconds for one transfer of the size the file was profiled for (TACCL's INPUT_GUIDE:
// beta in us/MB times the size in MB); that size is read from the name's suffix (`NDv2_1MB`,
// `_32KB`, `_1KB`), 1 MiB when there is none. The number of nodes is not in the file: TACCL
// takes it from the sketch (`nnodes`).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "optiflow/topology/topology.hpp"

namespace optiflow::topology {

/// The node types TACCL knows (taccl/topologies/generic.py): NDv2's hybrid cube-mesh (two link
/// classes), DGX-2's NVSwitch, a hub-and-spoke switch, or a custom link matrix.
enum class TacclNodeKind { ndv2, dgx2, hub_and_spoke, custom };
std::string_view to_string(TacclNodeKind kind);

/// The figures of a TACCL topology file as TACCL's synthesizer uses them, per node.
struct TacclProfile {
  std::string name;    ///< the file's "name"
  std::string source;  ///< the file it came from, for messages
  TacclNodeKind kind = TacclNodeKind::custom;
  int gpus_per_node = 0;
  int nics_per_node = 0;  ///< 0 when the file has no inter-node figures
  double alpha = 0;       ///< intra-node alpha, file units (us)
  /// links[src][dst]: number of links from local GPU src to dst (0: none).
  std::vector<std::vector<int>> links;
  /// betas[src][dst] and invbws[src][dst]: cost of one transfer on that link, file units. invbws
  /// are rounded down to integers where TACCL's loaders round them (int(...) in generic.py).
  std::vector<std::vector<double>> betas, invbws;
  double remote_alpha = 0, remote_beta = 0, remote_invbw = 0;
  /// The transfer size the costs were profiled for (from the name; 1 MiB by default).
  std::uint64_t reference_bytes = 0;
  /// Whether the node's GPUs meet in a switch (DGX-2, hub-and-spoke): TACCL's sketch then usually
  /// names a switch hyperedge.
  bool switched() const {
    return kind == TacclNodeKind::dgx2 || kind == TacclNodeKind::hub_and_spoke;
  }
};

/// A TACCL file read for `nodes` nodes: our topology (GPUs numbered node by node, NVLinks or an
/// NVSwitch per node, NICs on one InfiniBand switch when nodes > 1) and TACCL's own figures.
struct TacclTopology {
  Topology topology;
  TacclProfile profile;
};

/// Parses TACCL topology JSON `text` (`source` names it in errors) for `nodes` nodes. Throws
/// InputError naming the file and the field for malformed or inconsistent input.
TacclTopology parse_taccl_topology(std::string_view text, const std::string& source, int nodes);
/// Reads and parses the file at `path`.
TacclTopology read_taccl_topology(const std::string& path, int nodes);

}  // namespace optiflow::topology
