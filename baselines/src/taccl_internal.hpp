// The TACCL baseline's stages and the data they pass on (private to baselines/src/taccl*.cpp):
// the logical topology the sketch makes of the physical one, the routing MILP, the greedy
// ordering heuristic, the contiguity/scheduling MILP, and the lowering to the schedule IR.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "mip.hpp"
#include "optiflow/baselines/synthesis.hpp"
#include "optiflow/baselines/taccl.hpp"
#include "optiflow/topology/taccl_topology.hpp"
#include "optiflow/topology/topology.hpp"

namespace optiflow::baselines::taccl {

/// A GPU-to-GPU link as TACCL sees it, with its cost (TACCL's invbw: alpha + beta for one
/// chunk, in the cost unit of the topology) and the physical links it crosses.
struct LogicalLink {
  int src = 0, dst = 0;
  double cost = 0;
  /// The scheduler's split of the cost: a group of k chunks sent together over an inter-node
  /// link costs alpha + k * beta (TACCL: remote_alpha, remote_beta; inside a node alpha 0).
  double alpha = 0, beta = 0;
  bool remote = false;  ///< between nodes
  std::vector<topology::LinkId> route;
};

/// A switch hyperedge (TACCL's switches: "out" = one source to many, "in" = many to one): all
/// transfers on it share one link's time.
struct Hyperedge {
  std::vector<int> links;  ///< logical link ids on it
  double cost = 0;
  bool out = false;
  bool remote = false;
  int gpu = 0;  ///< the one source (out) or destination (in)
};

struct LogicalTopology {
  int ranks = 0, nodes = 1, per_node = 0;
  std::vector<LogicalLink> links;
  std::vector<std::vector<int>> link_of;  ///< [src][dst] -> logical link id, -1 if none
  std::vector<Hyperedge> switches;
  std::string cost_unit;  ///< e.g. "us for 1 MiB"

  int node_of(int rank) const { return rank / per_node; }
  int link(int src, int dst) const {
    return link_of[static_cast<std::size_t>(src)][static_cast<std::size_t>(dst)];
  }
};

/// The logical topology of `topology` under `sketch`: TACCL's costs from `profile` where the
/// topology came from a TACCL file, else derived from our links' figures at kReferenceBytes.
LogicalTopology logical_topology(const topology::Topology& topology, const TacclSketch& sketch,
                                 const topology::TacclProfile* profile);

/// Whether rotating every group of `size` ranks by `offset` maps the logical topology onto
/// itself (every link to a link of equal cost).
bool symmetric_under(const LogicalTopology& logical, int offset, int size);

inline constexpr double kReferenceBytes = 1 << 20;  ///< derived costs: one chunk of 1 MiB

/// What one MILP stage did.
struct StageReport {
  std::string name;
  std::string status;
  std::optional<double> gap;
  double objective = 0;
  double seconds = 0;
  int columns = 0, rows = 0, integers = 0;
  bool optimal() const { return status.rfind("optimal", 0) == 0; }
};

/// Solves one stage's MILP under options' time and gap limits, CBC's incumbents going to
/// options.progress, and records its status, gap, objective and time in `report`. A feasible
/// `start` is CBC's first incumbent.
mip::Solution solve_stage(const mip::Model& model, const SynthesisOptions& options,
                          StageReport& report, const std::vector<double>* start = nullptr);

/// The chunks of an All-Gather chunked up: chunk c starts on rank c / chunkup.
struct ChunkSpace {
  int ranks = 0, chunkup = 1;
  int chunks() const { return ranks * chunkup; }
  int owner(int chunk) const { return chunk / chunkup; }
};

/// The routing stage's answer: which chunk crosses which link, and when (TACCL's path encoding).
struct Routing {
  std::vector<std::vector<char>> sent;         ///< [chunk][link]
  std::vector<std::vector<double>> send_time;  ///< [chunk][link], where sent
  StageReport report;
};

Routing solve_routing(const LogicalTopology& logical, const TacclSketch& sketch,
                      const ChunkSpace& space, const SynthesisOptions& options);

/// The ordering heuristic's answer: per link the order of its chunks, per switch hyperedge the
/// order of its (chunk, link) transfers.
struct Ordering {
  std::vector<std::vector<int>> on_link;                    ///< [link] -> chunks
  std::vector<std::vector<std::pair<int, int>>> on_switch;  ///< [hyperedge] -> (chunk, link)
  int heuristic = 0;                                        ///< TACCL's number for it
};

Ordering order_transfers(const LogicalTopology& logical, const TacclSketch& sketch,
                         const ChunkSpace& space, const Routing& routing);

/// The scheduling stage's answer: when each transfer starts, and which chunks travel together
/// over an inter-node link (one alpha for the group).
struct Schedule {
  std::vector<std::vector<double>> send_time;  ///< [chunk][link], where sent
  /// [link] -> groups of chunks sent together, in send order
  std::vector<std::vector<std::vector<int>>> groups;
  StageReport report;
};

Schedule solve_schedule(const LogicalTopology& logical, const ChunkSpace& space,
                        const Routing& routing, const Ordering& ordering,
                        const SynthesisOptions& options);

}  // namespace optiflow::baselines::taccl
