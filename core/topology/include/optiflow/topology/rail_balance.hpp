// How an All-Gather across hosts should load the rails when their NICs differ.
//
// The program shape: GPU l of every host rings with GPU l of the other hosts through its NIC
// (a rail), after keeping `keep` of its own share for its rail and scattering the rest evenly to
// its host's other GPUs, which send it on theirs. With every keep at 1 a slow NIC stalls its
// whole rail; `balance_rails` chooses the keeps, per GPU, so that the busiest NIC finishes
// first: a small linear program over rails and hosts (COIN-OR CLP).
#pragma once

#include <optional>
#include <span>
#include <vector>

#include "optiflow/topology/topology.hpp"

namespace optiflow::topology {

/// Each GPU's port to the network (by rank): the slower of GPU -> NIC -> switch and
/// switch -> NIC -> GPU, in GB/s. Empty when some GPU has no NIC.
std::vector<double> nic_port_GBps(const Topology& topo);

/// rank_at[host][local]: the ranks as a grid of at least two hosts of at least two GPUs, every
/// host with as many; empty where they are not.
std::vector<std::vector<int>> rank_grid(const Topology& topo);

struct RailBalance {
  int hosts = 0, per_host = 0;
  std::vector<double> keep;  ///< by rank, in [0, 1]
  /// The busiest NIC's time for one share per GPU (seconds per GB of share): with the keeps
  /// chosen, and with every GPU keeping its whole share.
  double time = 0, even_time = 0;
};

/// The keeps that minimise the busiest NIC's time (then scatter the least). A NIC's load is
/// what a ring along its rail makes it carry: everything on the rail but its own host's data
/// (in) and but its ring neighbour's (out; both neighbours are counted, so the result holds for
/// either direction). NVLink inside a host is taken as free. Empty where the cluster is not
/// hosts x GPUs with a NIC each, or has one host or one GPU per host.
std::optional<RailBalance> balance_rails(const Topology& topo);

/// The busiest NIC's time for these keeps (by rank), as balance_rails counts it; 0 where it
/// finds no rails.
double rail_time(const Topology& topo, std::span<const double> keep);

/// Each share is cut into D parts per branch of the program's split, so a large D multiplies
/// the chunks the compiler must make: keeps are written as parts of at most this many.
inline constexpr int kMaxKeepDenominator = 32;

struct RoundedKeeps {
  int denominator = 1;
  std::vector<int> parts;  ///< by rank: keep ~ parts / denominator
};

/// The keeps as whole parts of the smallest denominator up to `most_parts` that writes each to
/// within 0.001; where none does, of the smallest whose busiest NIC's time is within `slack` of
/// the exact keeps' (or else of the one that comes closest).
RoundedKeeps round_keeps(const Topology& topo, std::span<const double> keep,
                         int most_parts = kMaxKeepDenominator, double slack = 0.005);

}  // namespace optiflow::topology
