// Semantics of the DSL evaluator on small topologies: which transfers each pattern, group
// form, split, route and avoid produces, checked transfer by transfer (docs/dsl.md).
#include "optiflow/compiler/evaluate.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "optiflow/dsl/parser.hpp"
#include "optiflow/topology/generators.hpp"

// GoogleTest prints fractions as text (found by argument-dependent lookup).
namespace optiflow::support {
static void PrintTo(const Rational& value, std::ostream* out) {
  *out << value.to_string();
}
}  // namespace optiflow::support

namespace optiflow::compiler {

static void PrintTo(const Interval& value, std::ostream* out) {
  *out << "[" << value.begin.to_string() << ", " << value.end.to_string() << ")";
}

namespace {

support::Rational frac(std::int64_t num, std::int64_t den) {
  return *support::Rational::make(num, den);
}
Interval share(std::int32_t rank, std::int32_t ranks) {
  return {frac(rank, ranks), frac(rank + 1, ranks)};
}
bool contains(const Interval& outer, const Interval& inner) {
  return outer.begin <= inner.begin && inner.end <= outer.end;
}
support::Rational length(const Interval& i) {
  return *sub(i.end, i.begin);
}

Plan run(const std::string& text, const topology::Topology& topology,
         const EvalLimits& limits = {}) {
  try {
    return evaluate(dsl::parse_program(text, "test.ofl"), topology, "test.ofl", text, limits);
  } catch (const dsl::DslError& e) {
    ADD_FAILURE() << e.render();
    return {};
  }
}

std::string describe(const Plan& plan, std::size_t index) {
  const Transfer& t = plan.transfers[index];
  return "transfer " + std::to_string(index) + ": " + std::to_string(t.src) + " -> " +
         std::to_string(t.dst) + " [" + t.data.begin.to_string() + ", " + t.data.end.to_string() +
         ") stage " + std::to_string(t.stage) + " round " + std::to_string(t.round);
}

// The rank whose share holds `data`.
std::int32_t owner(const Plan& plan, const Interval& data) {
  const support::Rational scaled = *mul(data.begin, support::Rational(plan.ranks));
  return static_cast<std::int32_t>(scaled.num() / scaled.den());
}

// Every rank ends with every share, receiving each part of it exactly once; every sender holds
// what it sends: its own share, or data a transfer it depends on brought it.
void expect_complete_allgather(const Plan& plan) {
  const std::int32_t n = plan.ranks;
  ASSERT_GT(n, 0);
  std::vector<std::vector<Interval>> held(static_cast<std::size_t>(n));
  for (std::int32_t r = 0; r < n; ++r) held[static_cast<std::size_t>(r)].push_back(share(r, n));
  for (std::size_t i = 0; i < plan.transfers.size(); ++i) {
    const Transfer& t = plan.transfers[i];
    SCOPED_TRACE(describe(plan, i));
    ASSERT_TRUE(t.src >= 0 && t.src < n && t.dst >= 0 && t.dst < n && t.src != t.dst);
    ASSERT_LT(t.data.begin, t.data.end);
    bool has_it = contains(share(t.src, n), t.data);
    for (std::int32_t d : plan.deps[i]) {
      ASSERT_TRUE(d >= 0 && static_cast<std::size_t>(d) < i)
          << "dependency " << d << " is not earlier";
      const Transfer& dep = plan.transfers[static_cast<std::size_t>(d)];
      has_it = has_it || (dep.dst == t.src && contains(dep.data, t.data));
    }
    EXPECT_TRUE(has_it)
        << "the sender neither owns the data nor waits for the transfer that brings it";
    held[static_cast<std::size_t>(t.dst)].push_back(t.data);
  }
  for (std::int32_t r = 0; r < n; ++r) {
    auto parts = held[static_cast<std::size_t>(r)];
    std::sort(parts.begin(), parts.end(),
              [](const Interval& a, const Interval& b) { return a.begin < b.begin; });
    support::Rational cursor(0);
    for (const Interval& part : parts) {
      EXPECT_EQ(part.begin, cursor)
          << "rank " << r << (part.begin < cursor ? " receives data twice" : " misses data");
      cursor = std::max(cursor, part.end);
    }
    EXPECT_EQ(cursor, support::Rational(1)) << "rank " << r << " misses the end of the buffer";
  }
}

std::set<std::int32_t> rounds_of(const Plan& plan) {
  std::set<std::int32_t> rounds;
  for (const Transfer& t : plan.transfers) rounds.insert(t.round);
  return rounds;
}

// ---- Patterns ---------------------------------------------------------------------------

TEST(DslEval, RingPassesEachPieceHopByHop) {
  const Plan plan = run("ring over all", topology::make_ring(8));
  ASSERT_EQ(plan.transfers.size(), 8u * 7u);
  expect_complete_allgather(plan);
  // For each source, the transfer that delivered its share to each rank.
  std::map<std::pair<std::int32_t, std::int32_t>, std::int32_t>
      delivered;  // (source, rank) -> transfer
  for (std::size_t i = 0; i < plan.transfers.size(); ++i) {
    const Transfer& t = plan.transfers[i];
    SCOPED_TRACE(describe(plan, i));
    const std::int32_t source = owner(plan, t.data);
    EXPECT_EQ(t.data, share(source, 8)) << "a ring moves whole shares";
    EXPECT_EQ(t.dst, (t.src + 1) % 8) << "a ring moves to the next rank";
    const std::int32_t hop = (t.dst - source + 8) % 8;  // 1 .. 7
    EXPECT_EQ(t.round, hop - 1);
    if (hop == 1) {
      EXPECT_TRUE(plan.deps[i].empty()) << "the first hop leaves from the owner";
    } else {
      ASSERT_EQ(plan.deps[i].size(), 1u);
      EXPECT_EQ(plan.deps[i][0], delivered.at({source, t.src}))
          << "each hop waits for the previous one";
    }
    delivered[{source, t.dst}] = static_cast<std::int32_t>(i);
  }
}

TEST(DslEval, DirectSendsFromTheOwnerWithoutDependencies) {
  const Plan plan = run("direct over all", topology::make_fullmesh(8));
  ASSERT_EQ(plan.transfers.size(), 56u);
  expect_complete_allgather(plan);
  for (std::size_t i = 0; i < plan.transfers.size(); ++i) {
    const Transfer& t = plan.transfers[i];
    EXPECT_TRUE(plan.deps[i].empty());
    EXPECT_EQ(t.data, share(t.src, 8));
    EXPECT_EQ(t.round, 0);
  }
}

TEST(DslEval, RecursiveDoublingTakesLog2Rounds) {
  const Plan plan = run("rd over all", topology::make_fullmesh(8));
  expect_complete_allgather(plan);
  EXPECT_EQ(plan.transfers.size(), 56u);
  EXPECT_EQ(rounds_of(plan), (std::set<std::int32_t>{0, 1, 2}));
  for (const Transfer& t : plan.transfers)
    EXPECT_EQ(t.src ^ t.dst, 1 << t.round) << "round k pairs ranks that differ in bit k";
  // In round k every rank sends 2^k shares, everything it has gathered.
  std::map<std::pair<std::int32_t, std::int32_t>, int> sent;  // (rank, round) -> shares
  for (const Transfer& t : plan.transfers) ++sent[{t.src, t.round}];
  for (const auto& [key, count] : sent) EXPECT_EQ(count, 1 << key.second);
}

TEST(DslEval, BruckReachesEveryoneOnceOnSixRanks) {
  const Plan plan = run("bruck over all", topology::make_fullmesh(6));
  expect_complete_allgather(plan);
  EXPECT_EQ(plan.transfers.size(), 30u);
  EXPECT_EQ(rounds_of(plan), (std::set<std::int32_t>{0, 1, 2}));
  for (const Transfer& t : plan.transfers)
    EXPECT_EQ((t.dst - t.src + 6) % 6, 1 << t.round) << "round k sends 2^k positions on";
}

struct PatternCase {
  std::string program;
  std::int32_t ranks;
  std::size_t transfers_per_share;  // transfers that carry one rank's share
};

void PrintTo(const PatternCase& c, std::ostream* out) {
  *out << "'" << c.program << "' on " << c.ranks << " ranks";
}

class DslEvalPatterns : public testing::TestWithParam<PatternCase> {};

TEST_P(DslEvalPatterns, DeliverEveryPieceToEveryRankOnce) {
  const PatternCase& c = GetParam();
  const Plan plan = run(c.program, topology::make_fullmesh(c.ranks));
  expect_complete_allgather(plan);
  EXPECT_EQ(plan.transfers.size(), static_cast<std::size_t>(c.ranks) * c.transfers_per_share);
}

std::vector<PatternCase> pattern_cases() {
  std::vector<PatternCase> cases;
  for (std::int32_t n : {2, 7, 8}) {
    const auto others = static_cast<std::size_t>(n - 1);
    for (const char* pattern :
         {"ring", "direct", "binomial", "binary", "kary 3", "kary 64", "chain", "bruck", "bfs"})
      cases.push_back({std::string(pattern) + " over all", n, others});
    cases.push_back({"ring over all reverse", n, others});
    cases.push_back({"dbtree over all", n, 2 * others});  // two halves
    cases.push_back({"scatter over all\ndirect over all", n, others * others});
  }
  cases.push_back({"rd over all", 8, 7});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Patterns, DslEvalPatterns, testing::ValuesIn(pattern_cases()),
                         [](const testing::TestParamInfo<PatternCase>& info) {
                           std::string name =
                               info.param.program + "_" + std::to_string(info.param.ranks);
                           for (char& c : name)
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           return name;
                         });

TEST(DslEval, ChainMovesBetweenNeighboursOnly) {
  const Plan plan = run("chain over all", topology::make_fullmesh(8));
  expect_complete_allgather(plan);
  for (const Transfer& t : plan.transfers) EXPECT_EQ(std::abs(t.src - t.dst), 1);
}

TEST(DslEval, BinomialSendsFarthestHalfFirst) {
  const Plan plan = run("binomial over all", topology::make_fullmesh(8));
  for (const Transfer& t : plan.transfers)
    EXPECT_EQ((t.dst - t.src + 8) % 8, 4 >> t.round) << "round k sends 2^(L-1-k) positions on";
}

TEST(DslEval, HoldersAreSkipped) {
  // The second ring finds every rank already holding every share.
  EXPECT_EQ(run("ring over all\nring over all reverse", topology::make_ring(8)).transfers.size(),
            56u);
}

// ---- Groups ------------------------------------------------------------------------------

TEST(DslEval, HierarchicalCrossesHostsOnlyAlongRails) {
  const topology::Topology topology = topology::make_a100(4);
  const Plan plan = run("rd over rails\ndirect over hosts", topology);
  expect_complete_allgather(plan);
  auto host = [&](std::int32_t r) { return topology.node(topology.gpu_of_rank(r)).host; };
  auto local = [&](std::int32_t r) { return topology.node(topology.gpu_of_rank(r)).local; };
  std::size_t inter_host = 0;
  for (std::size_t i = 0; i < plan.transfers.size(); ++i) {
    const Transfer& t = plan.transfers[i];
    SCOPED_TRACE(describe(plan, i));
    if (host(t.src) != host(t.dst)) {
      ++inter_host;
      EXPECT_EQ(local(t.src), local(t.dst)) << "inter-host data moves between same-local ranks";
      EXPECT_EQ(t.stage, 0);
    } else {
      EXPECT_EQ(t.stage, 1) << "the second step stays inside hosts";
    }
  }
  EXPECT_EQ(inter_host, 32u * 3u);  // each share reaches the 3 other hosts on its rail
}

TEST(DslEval, ScatterCutsAPieceIntoOnePartPerOtherMember) {
  const topology::Topology topology = topology::make_a100(2);
  const Plan plan = run("scatter over hosts\nrd over rails\ndirect over hosts", topology);
  expect_complete_allgather(plan);
  std::map<std::int32_t, std::vector<const Transfer*>> first_step;  // source -> its transfers
  for (const Transfer& t : plan.transfers)
    if (t.stage == 0) first_step[t.src].push_back(&t);
  ASSERT_EQ(first_step.size(), 16u);
  for (const auto& [source, transfers] : first_step) {
    SCOPED_TRACE("source " + std::to_string(source));
    ASSERT_EQ(transfers.size(), 7u) << "one part for each other GPU of the host";
    std::set<std::int32_t> receivers;
    support::Rational total(0);
    for (const Transfer* t : transfers) {
      receivers.insert(t->dst);
      EXPECT_EQ(topology.node(topology.gpu_of_rank(t->dst)).host,
                topology.node(topology.gpu_of_rank(source)).host);
      EXPECT_EQ(length(t->data), frac(1, 16 * 7));
      EXPECT_TRUE(contains(share(source, 16), t->data));
      total = *add(total, length(t->data));
    }
    EXPECT_EQ(receivers.size(), 7u);
    EXPECT_EQ(total, frac(1, 16));
  }
}

TEST(DslEval, WhereSelectsMembers) {
  const Plan plan =
      run("direct over all where rank < 4\ndirect over all", topology::make_fullmesh(8));
  expect_complete_allgather(plan);
  std::size_t first = 0;
  for (const Transfer& t : plan.transfers)
    if (t.stage == 0) {
      ++first;
      EXPECT_TRUE(t.src < 4 && t.dst < 4);
    }
  EXPECT_EQ(first, 12u);
}

TEST(DslEval, ByOrdersMembers) {
  for (const Transfer& t : run("ring over all by -rank", topology::make_ring(8)).transfers)
    EXPECT_EQ(t.dst, (t.src + 7) % 8) << "descending rank order";

  // (host, -local) on two hosts: 7 6 ... 0 15 14 ... 8, then around.
  const topology::Topology topology = topology::make_a100(2);
  const std::vector<std::int32_t> order{7, 6, 5, 4, 3, 2, 1, 0, 15, 14, 13, 12, 11, 10, 9, 8};
  std::map<std::int32_t, std::int32_t> next;
  for (std::size_t i = 0; i < order.size(); ++i) next[order[i]] = order[(i + 1) % order.size()];
  const Plan plan = run("ring over all by (host, -local)", topology);
  expect_complete_allgather(plan);
  for (const Transfer& t : plan.transfers) EXPECT_EQ(t.dst, next.at(t.src));
}

TEST(DslEval, ExplicitGroupsAndUnder) {
  const topology::Topology topology = topology::make_a100(2);
  // rails by hand: [[0, 8], [1, 9], ...] then hosts with `under` each NVSwitch.
  std::string rails = "[";
  for (int local = 0; local < 8; ++local)
    rails +=
        (local ? ", [" : "[") + std::to_string(local) + ", @h1.gpu" + std::to_string(local) + "]";
  rails += "]";
  const Plan plan = run(
      "direct over " + rails + "\ndirect over under @h0.nvswitch\ndirect over [8..15]", topology);
  expect_complete_allgather(plan);
  for (const Transfer& t : plan.transfers) {
    if (t.stage == 0) {
      EXPECT_EQ(std::abs(t.src - t.dst), 8);
    } else if (t.stage == 1) {
      EXPECT_TRUE(t.src < 8 && t.dst < 8);
    } else {
      EXPECT_TRUE(t.src >= 8 && t.dst >= 8);
    }
  }
}

// ---- Splits ------------------------------------------------------------------------------

TEST(DslEval, WeightsSplitExactly) {
  const Plan plan =
      run("split {\n  weight 0.7 { ring over all }\n  weight 0.3 { ring over all reverse }\n}",
          topology::make_ring(8));
  expect_complete_allgather(plan);
  ASSERT_EQ(plan.transfers.size(), 2u * 56u);
  for (std::size_t i = 0; i < plan.transfers.size(); ++i) {
    const Transfer& t = plan.transfers[i];
    SCOPED_TRACE(describe(plan, i));
    const std::int32_t source = owner(plan, t.data);
    const support::Rational cut = *add(frac(source, 8), frac(7, 80));  // 7/10 of the share
    if (t.stage == 0) {
      EXPECT_EQ(t.data, (Interval{frac(source, 8), cut}));
      EXPECT_EQ(t.dst, (t.src + 1) % 8);
    } else {
      EXPECT_EQ(t.data, (Interval{cut, frac(source + 1, 8)}));
      EXPECT_EQ(t.dst, (t.src + 7) % 8);
    }
  }
}

TEST(DslEval, WeightsAreEvaluatedPerSourceRank) {
  const Plan plan =
      run("split {\n  weight rank == 0 ? 1 : 0 { direct over all }\n"
          "  weight rank == 0 ? 0 : 2/3 { ring over all }\n}",
          topology::make_ring(8));
  expect_complete_allgather(plan);
  for (const Transfer& t : plan.transfers) {
    const std::int32_t source = owner(plan, t.data);
    EXPECT_EQ(t.data, share(source, 8)) << "a zero weight leaves the other branch the whole share";
    EXPECT_EQ(t.stage == 0, source == 0);
  }
}

TEST(DslEval, SplitEvenBindsThePartIndex) {
  const Plan plan =
      run("split 2 as h {\n  ring over all by h == 0 ? rank : -rank\n}", topology::make_ring(8));
  expect_complete_allgather(plan);
  ASSERT_EQ(plan.transfers.size(), 112u);
  for (const Transfer& t : plan.transfers) {
    const std::int32_t source = owner(plan, t.data);
    EXPECT_EQ(length(t.data), frac(1, 16));
    const bool first_half = t.data.begin == frac(source, 8);
    EXPECT_EQ(t.dst, first_half ? (t.src + 1) % 8 : (t.src + 7) % 8);
  }
}

TEST(DslEval, MultiRingExampleGivesOneRingPerRail) {
  const topology::Topology topology = topology::make_a100(2);
  const Plan plan =
      run("split nlocal as r {\n  ring over all by (host, (local - r) % nlocal)\n}", topology);
  expect_complete_allgather(plan);
  for (const Transfer& t : plan.transfers) {
    const topology::Node& from = topology.node(topology.gpu_of_rank(t.src));
    const topology::Node& to = topology.node(topology.gpu_of_rank(t.dst));
    if (from.host == to.host) continue;
    // Part r of every share crosses hosts from GPU r-1 into GPU r.
    const support::Rational part =
        *mul(*sub(t.data.begin, frac(owner(plan, t.data), 16)), support::Rational(16 * 8));
    ASSERT_TRUE(part.is_integer());
    EXPECT_EQ(to.local, part.num());
    EXPECT_EQ(from.local, (part.num() + 7) % 8);
  }
}

// ---- Routes, avoided links, bfs ----------------------------------------------------------

topology::NodeId node(const topology::Topology& topology, const std::string& id) {
  const auto found = topology.find_node(id);
  EXPECT_TRUE(found) << id;
  return found.value_or(0);
}

bool linked(const topology::Topology& topology, topology::NodeId a, topology::NodeId b) {
  for (topology::LinkId l : topology.out_links(a))
    if (topology.link(l).dst == b) return true;
  return false;
}

TEST(DslEval, RouteGivesExplicitPathsInItsBlock) {
  const topology::Topology topology = topology::make_a100(2);
  const std::string route = "route 0 -> 8 via @h0.nic0 @leaf0 @h1.nic0\n";
  const Plan plan = run("split {\n  weight 1 {\n    " + route +
                            "    ring over all by (local, host)\n  }\n"
                            "  weight 1 { ring over all by (local, host) }\n}",
                        topology);
  expect_complete_allgather(plan);
  const std::vector<topology::NodeId> path{topology.gpu_of_rank(0), node(topology, "h0.nic0"),
                                           node(topology, "leaf0"), node(topology, "h1.nic0"),
                                           topology.gpu_of_rank(8)};
  std::size_t routed = 0;
  for (std::size_t i = 0; i < plan.transfers.size(); ++i) {
    const Transfer& t = plan.transfers[i];
    SCOPED_TRACE(describe(plan, i));
    if (t.src == 0 && t.dst == 8 && t.stage == 0) {
      ++routed;
      ASSERT_GE(t.explicit_route, 0);
      EXPECT_EQ(plan.explicit_routes.at(static_cast<std::size_t>(t.explicit_route)), path);
    } else {
      EXPECT_EQ(t.explicit_route, -1) << "routes apply to their pair, in their block";
    }
  }
  EXPECT_EQ(routed, 15u);  // every share but rank 8's passes 0 -> 8
}

TEST(DslEval, AvoidMakesBlockScopedAvoidSets) {
  const topology::Topology topology = topology::make_a100(2);
  const Plan plan =
      run("split {\n  weight 1 {\n    avoid @h0.nic0 <-> @leaf0, @h1.gpu2 -> @h1.nic2\n    ring "
          "over all\n  }\n"
          "  weight 1 { ring over all }\n}",
          topology);
  expect_complete_allgather(plan);
  std::vector<topology::LinkId> expected;
  for (topology::LinkId l = 0; l < topology.link_count(); ++l) {
    const topology::Link& link = topology.link(l);
    const std::string from = topology.node(link.src).id, to = topology.node(link.dst).id;
    if ((from == "h0.nic0" && to == "leaf0") || (from == "leaf0" && to == "h0.nic0") ||
        (from == "h1.gpu2" && to == "h1.nic2"))
      expected.push_back(l);
  }
  ASSERT_EQ(expected.size(), 3u);
  ASSERT_EQ(plan.avoid_sets.size(), 2u);
  EXPECT_TRUE(plan.avoid_sets[0].empty());
  EXPECT_EQ(plan.avoid_sets[1], expected);
  for (const Transfer& t : plan.transfers) EXPECT_EQ(t.avoid_set, t.stage == 0 ? 1 : 0);
}

// Every transfer of a bfs step carries a route that is a path of the topology from the
// sender's GPU to the receiver's, through no other GPU, and off the avoided links.
void expect_bfs_paths(const Plan& plan, const topology::Topology& topology,
                      const std::set<std::pair<topology::NodeId, topology::NodeId>>& avoided = {}) {
  for (std::size_t i = 0; i < plan.transfers.size(); ++i) {
    const Transfer& t = plan.transfers[i];
    SCOPED_TRACE(describe(plan, i));
    ASSERT_GE(t.explicit_route, 0);
    const auto& path = plan.explicit_routes.at(static_cast<std::size_t>(t.explicit_route));
    ASSERT_GE(path.size(), 2u);
    EXPECT_EQ(path.front(), topology.gpu_of_rank(t.src));
    EXPECT_EQ(path.back(), topology.gpu_of_rank(t.dst));
    for (std::size_t k = 0; k + 1 < path.size(); ++k) {
      EXPECT_TRUE(linked(topology, path[k], path[k + 1]))
          << topology.node(path[k]).id << " -> " << topology.node(path[k + 1]).id;
      EXPECT_FALSE(avoided.contains({path[k], path[k + 1]}))
          << "uses avoided " << topology.node(path[k]).id << " -> "
          << topology.node(path[k + 1]).id;
      if (k > 0) {
        EXPECT_NE(topology.node(path[k]).kind, topology::NodeKind::gpu)
            << "a path passes through a member";
      }
    }
  }
}

TEST(DslEval, BfsBuildsTreesAlongTopologyPaths) {
  for (const topology::Topology& topology :
       {topology::make_a100(2), topology::make_torus(4, 4), topology::make_ring(6)}) {
    SCOPED_TRACE(topology.name());
    const Plan forward = run("bfs over all", topology);
    expect_complete_allgather(forward);
    expect_bfs_paths(forward, topology);
    const Plan backward = run("bfs over all reverse", topology);
    expect_complete_allgather(backward);
    expect_bfs_paths(backward, topology);
  }
  // On the torus, visiting links in the other order gives other trees: some rank gets some
  // share from another parent.
  const topology::Topology torus = topology::make_torus(4, 4);
  using Edge = std::tuple<std::int32_t, std::int32_t, std::int32_t>;  // (owner, src, dst)
  auto edges = [](const Plan& plan) {
    std::set<Edge> out;
    for (const Transfer& t : plan.transfers) out.insert({owner(plan, t.data), t.src, t.dst});
    return out;
  };
  const auto forward = edges(run("bfs over all", torus)),
             backward = edges(run("bfs over all reverse", torus));
  EXPECT_EQ(forward.size(), backward.size());
  EXPECT_NE(forward, backward);
}

TEST(DslEval, BfsStaysOffAvoidedLinks) {
  const topology::Topology topology = topology::make_a100(2);
  const Plan plan =
      run("avoid @h1.nic3 <-> @leaf3, @h0.gpu0 -> @h0.nvswitch\nbfs over all", topology);
  expect_complete_allgather(plan);
  const topology::NodeId nic = node(topology, "h1.nic3"), leaf = node(topology, "leaf3");
  expect_bfs_paths(
      plan, topology,
      {{nic, leaf}, {leaf, nic}, {topology.gpu_of_rank(0), node(topology, "h0.nvswitch")}});
}

TEST(DslEval, BfsOverASubgroupJoinsMembersThroughOtherNodes) {
  const topology::Topology topology = topology::make_ring(8);
  const Plan plan = run("bfs over [[0, 2, 4, 6], [1, 3, 5, 7]]\nring over all", topology);
  for (const Transfer& t : plan.transfers) {
    if (t.stage != 0) continue;
    ASSERT_GE(t.explicit_route, 0);
    const auto& path = plan.explicit_routes.at(static_cast<std::size_t>(t.explicit_route));
    EXPECT_EQ(path.size(), 3u) << "members two hops apart, through a GPU outside the group";
    EXPECT_EQ(t.src % 2, t.dst % 2);
  }
}

// ---- Settings and limits -----------------------------------------------------------------

TEST(DslEval, SettingsReachThePlan) {
  const Plan plan = run("pipeline 4\nchannels 2\nring over all", topology::make_ring(4));
  EXPECT_EQ(plan.pipeline, 4);
  EXPECT_EQ(plan.channels, 2);
  const Plan plain = run("ring over all", topology::make_ring(4));
  EXPECT_EQ(plain.pipeline, 1);
  EXPECT_EQ(plain.channels, 1);
}

TEST(DslEval, LimitsRejectHostileProgramsFast) {
  const std::string text = "split 1000 as a { split 1000 as b { ring over all } }";
  const topology::Topology topology = topology::make_a100(4);
  const dsl::Program program = dsl::parse_program(text, "hostile.ofl");
  struct Case {
    EvalLimits limits;
    std::string message;
  };
  // Each case lifts the other limits, so that only its own can stop the program.
  constexpr std::int64_t kChunks = std::int64_t{1} << 40;
  const std::vector<Case> cases{
      {{.max_transfers = 1u << 23,
        .max_pieces = 50'000,
        .max_work = 1u << 28,
        .max_chunks = kChunks},
       "more than 50000 pieces"},
      {{.max_transfers = 10'000,
        .max_pieces = 1u << 20,
        .max_work = 1u << 28,
        .max_chunks = kChunks},
       "more than 10000 transfers"},
      {{.max_transfers = 1u << 23,
        .max_pieces = 1u << 20,
        .max_work = 100'000,
        .max_chunks = kChunks},
       "work limit"},
      {{.max_transfers = 1u << 23, .max_pieces = 1u << 20, .max_work = 1u << 28},
       "chunks per buffer"}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.message);
    const auto start = std::chrono::steady_clock::now();
    try {
      evaluate(program, topology, "hostile.ofl", text, c.limits);
      ADD_FAILURE() << "expected a limit error";
    } catch (const dsl::DslError& e) {
      EXPECT_NE(std::string(e.what()).find(c.message), std::string::npos) << e.what();
      EXPECT_TRUE(std::string(e.what()).starts_with("hostile.ofl:1:")) << e.what();
    }
    const std::chrono::duration<double> spent = std::chrono::steady_clock::now() - start;
    EXPECT_LT(spent.count(), 1.0);
  }
}

}  // namespace
}  // namespace optiflow::compiler
