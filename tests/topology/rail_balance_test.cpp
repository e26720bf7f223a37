// The rail-balance linear program, checked by counting the NICs' loads from its keeps here.
#include "optiflow/topology/rail_balance.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "optiflow/topology/generators.hpp"
#include "optiflow/topology/variation.hpp"

namespace optiflow::topology {
namespace {

// The busiest NIC's time (seconds per GB of share) when GPU r keeps keep[r] of its share for
// its rail and scatters the rest evenly to its host's peers, and each rail is a ring in either
// direction: NIC (h, l) receives all of rail l's data but host h's and sends all but a
// neighbour's.
double busiest_time(const Topology& topo, const std::vector<double>& keep) {
  const std::vector<double> bw = nic_port_GBps(topo);
  std::size_t H = 0, L = 0;
  for (int r = 0; r < topo.rank_count(); ++r) {
    H = std::max(H, static_cast<std::size_t>(topo.node(topo.gpu_of_rank(r)).host) + 1);
    L = std::max(L, static_cast<std::size_t>(topo.node(topo.gpu_of_rank(r)).local) + 1);
  }
  std::vector<std::vector<double>> on_rail(H, std::vector<double>(L));  // [host][rail]
  std::vector<std::vector<double>> port(H, std::vector<double>(L));
  for (int r = 0; r < topo.rank_count(); ++r) {
    const Node& gpu = topo.node(topo.gpu_of_rank(r));
    const auto h = static_cast<std::size_t>(gpu.host), l = static_cast<std::size_t>(gpu.local);
    port[h][l] = bw[static_cast<std::size_t>(r)];
    const double k = keep[static_cast<std::size_t>(r)];
    for (std::size_t rail = 0; rail < L; ++rail)
      on_rail[h][rail] += rail == l ? k : (1 - k) / static_cast<double>(L - 1);
  }
  double worst = 0;
  for (std::size_t h = 0; h < H; ++h)
    for (std::size_t l = 0; l < L; ++l) {
      double total = 0;
      for (std::size_t g = 0; g < H; ++g) total += on_rail[g][l];
      for (std::size_t n : {h, (h + 1) % H, (h + H - 1) % H})
        worst = std::max(worst, (total - on_rail[n][l]) / port[h][l]);
    }
  return worst;
}

TEST(RailBalance, HealthyRailsKeepEveryShare) {
  const Topology topo = make_a100(4);
  const auto balance = balance_rails(topo);
  ASSERT_TRUE(balance.has_value());
  EXPECT_EQ(balance->hosts, 4);
  EXPECT_EQ(balance->per_host, 8);
  for (double k : balance->keep) EXPECT_NEAR(k, 1, 1e-9);
  EXPECT_NEAR(balance->time, balance->even_time, 1e-9);
  // Three hosts' shares through a 25 GB/s port.
  EXPECT_NEAR(balance->even_time, 3.0 / 25, 1e-12);
}

TEST(RailBalance, ASlowNicHandsItsRailsShareToItsPeersAndTheLoadsAgree) {
  const Topology topo = make_a100x4_degraded();
  const auto balance = balance_rails(topo);
  ASSERT_TRUE(balance.has_value());
  const std::vector<double> ones(balance->keep.size(), 1.0);
  EXPECT_NEAR(busiest_time(topo, ones), balance->even_time, 1e-9);
  EXPECT_NEAR(busiest_time(topo, balance->keep), balance->time, 1e-9);
  // A quarter-speed NIC on rail 3 of host 1: keeping every share is four times the healthy
  // time; balanced, the 32 NICs share the load nearly evenly.
  EXPECT_NEAR(balance->even_time, 4 * 3.0 / 25, 1e-9);
  EXPECT_LT(balance->time, 1.15 * 3.0 / 25);
  // The per-rail closed form (every GPU of rail 3 keeps 8/29) is one of the LP's points.
  std::vector<double> per_rail(balance->keep.size());
  for (int r = 0; r < topo.rank_count(); ++r)
    per_rail[static_cast<std::size_t>(r)] =
        topo.node(topo.gpu_of_rank(r)).local == 3 ? 8.0 / 29 : 1;
  EXPECT_LE(balance->time, busiest_time(topo, per_rail) * (1 + 1e-9));
  EXPECT_NEAR(rail_time(topo, per_rail), busiest_time(topo, per_rail), 1e-12);

  // Written in parts: 8/29 exactly when 29 parts are allowed, 1/4 when at most 8 are.
  const RoundedKeeps exact = round_keeps(topo, per_rail);
  EXPECT_EQ(exact.denominator, 29);
  EXPECT_EQ(exact.parts[3], 8);
  EXPECT_EQ(exact.parts[0], 29);
  const RoundedKeeps coarse = round_keeps(topo, per_rail, 8);
  EXPECT_EQ(coarse.denominator, 4);
  EXPECT_EQ(coarse.parts[11], 1);
}

TEST(RailBalance, VariedClustersNeverLoseToKeepingEveryShare) {
  for (std::uint64_t seed = 1; seed <= 6; ++seed) {
    const Topology topo = draw_faults(make_a100(4), seed, 2).topology;
    const auto balance = balance_rails(topo);
    if (!balance) continue;  // a host lost a GPU: not a grid
    EXPECT_LE(balance->time, balance->even_time + 1e-12) << topo.name();
    EXPECT_NEAR(busiest_time(topo, balance->keep), balance->time, 1e-9) << topo.name();
  }
}

TEST(RailBalance, OneHostOrNoNicsHasNoRails) {
  EXPECT_FALSE(balance_rails(make_dgx1()).has_value());
  EXPECT_FALSE(balance_rails(make_a100(1)).has_value());
  EXPECT_TRUE(nic_port_GBps(make_dgx1()).empty());
}

}  // namespace
}  // namespace optiflow::topology
