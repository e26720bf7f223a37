// TACCL's communication sketch (Shah et al., NSDI'23; github.com/microsoft/taccl, its
// taccl/examples/sketch files and cli/common.py's parse_and_get_topo): what the user tells
// TACCL's synthesizer about the algorithm's shape, read from TACCL's own JSON or derived from a
// topology.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "optiflow/topology/topology.hpp"

namespace optiflow::baselines {

/// How links inside a node are treated (intranode_sketch.strategy).
enum class TacclIntraStrategy {
  none,     ///< every link on its own
  switch_,  ///< the listed GPU groups share a switch: a GPU's sends (and receives) serialise
  minmax,   ///< also minimise the most used link's load
  maxmin,   ///< also maximise the least used link's load
};

/// The switch hyperedge strategy (switch_hyperedge_strategy): prefer few or many distinct
/// GPU pairs over a switch.
enum class TacclHyperedge { none, uc_min, uc_max };

struct TacclSketch {
  std::string source;  ///< the file (or "default sketch for T")
  int nnodes = 1;
  TacclIntraStrategy intra = TacclIntraStrategy::none;
  std::vector<std::vector<int>> switches;  ///< local GPU groups on one switch
  TacclHyperedge hyperedge = TacclHyperedge::none;
  /// internode_sketch (nnodes > 1), strategy "relay": sender local GPU -> receiver local GPUs
  /// of every other node; or one of TACCL's names for a whole map, "fully-connected" (every GPU
  /// to every GPU) and "direct-map" (each GPU to the GPU of its local index).
  std::map<int, std::vector<int>> internode_conn;
  std::string internode_conn_name;
  /// gpus_to_sender_rev_map: sender local GPU -> the local GPUs whose chunks it sends out.
  std::map<int, std::vector<int>> chunk_to_relay;
  bool enforce_ordering = false;
  /// symmetry_offsets: (offset, group size) pairs; rotating every group of `size` ranks by
  /// `offset` maps the algorithm onto itself.
  std::vector<std::pair<int, int>> symmetry_offsets;
  int input_chunkup = 1;  ///< hyperparameters.input_chunkup: chunks per GPU
};

/// Parses TACCL sketch JSON; InputError naming `source` and the field on malformed input.
TacclSketch parse_taccl_sketch(std::string_view text, const std::string& source);
TacclSketch read_taccl_sketch(const std::string& path);

/// The sketch a TACCL user would write for `topology` (GPUs numbered node by node): a switch
/// over each node's GPUs where they meet in an NVSwitch (uc-min); across nodes a relay from
/// every GPU to the GPU of its local index elsewhere when each GPU has a NIC (direct-map), from
/// local GPU 0 to local GPU 1 when a node has one NIC (TACCL's NDv2 sketches); the rotations of
/// local indices and of nodes that map the topology onto itself as symmetry offsets;
/// input_chunkup 1.
TacclSketch default_taccl_sketch(const topology::Topology& topology);

/// The sketch's inter-node map for nodes of `gpus_per_node` GPUs, named maps expanded.
std::map<int, std::vector<int>> relay_map(const TacclSketch& sketch, int gpus_per_node);

}  // namespace optiflow::baselines
