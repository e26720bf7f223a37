// Default routes: the cheapest path, and equally cheap paths through switches spread by
// destination (InfiniBand's fat-tree routing).
#include "optiflow/topology/routing.hpp"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "optiflow/topology/topology_io.hpp"

namespace optiflow::topology {
namespace {

// The node ids a path visits after its source, by name.
std::vector<std::string> visited(const Topology& t, const std::vector<LinkId>& path) {
  std::vector<std::string> names;
  for (LinkId l : path) names.push_back(t.node(t.link(l).dst).id);
  return names;
}

// a -> c directly over a slow link, or through switch b over two fast ones.
Topology triangle() {
  Topology t("triangle");
  const NodeId a = t.add_node({"a", NodeKind::gpu, 0, 0, 0});
  const NodeId b = t.add_node({"b", NodeKind::switch_, -1, -1, -1});
  const NodeId c = t.add_node({"c", NodeKind::gpu, 1, 1, 0});
  t.add_link(a, c, {LinkKind::ib, 1.0, 1.0});
  t.add_link(a, b, {LinkKind::nvlink, 100.0, 1.0});
  t.add_link(b, c, {LinkKind::nvlink, 100.0, 1.0});
  return t;
}

TEST(Router, TakesTheCheapestPathAndAvoidsWhatItIsTold) {
  const Topology t = triangle();
  Router router(t);
  EXPECT_EQ(visited(t, router.path(0, 2)), (std::vector<std::string>{"b", "c"}));
  const std::vector<LinkId> avoid_switch{1};
  EXPECT_EQ(visited(t, router.path(0, 2, avoid_switch)), (std::vector<std::string>{"c"}));
  EXPECT_TRUE(router.path(2, 0).empty());  // no link back
  EXPECT_TRUE(router.path(0, 0).empty());
}

// fattree16: four leaves of four GPUs, every leaf linked to each of four spines. A transfer to
// rank r between leaves crosses spine r mod 4, so that the four transfers from rank 0 to the
// GPUs of leaf 1 take four different spines, and every transfer to one GPU takes the same.
TEST(Router, SpreadsEquallyCheapPathsOverTheSpinesByDestination) {
  const Topology t = load_topology("fattree16");
  Router router(t);
  std::set<std::string> spines;
  for (int r = 4; r < 8; ++r) {
    const auto path = visited(t, router.path(t.gpu_of_rank(0), t.gpu_of_rank(r)));
    ASSERT_EQ(path.size(), 4u) << r;  // leaf0, spine, leaf1, the GPU
    EXPECT_EQ(path[1], "spine" + std::to_string(r % 4)) << r;
    spines.insert(path[1]);
  }
  EXPECT_EQ(spines.size(), 4u);
  for (int from : {1, 8, 13})
    EXPECT_EQ(visited(t, router.path(t.gpu_of_rank(from), t.gpu_of_rank(6)))[1], "spine2") << from;
  // Inside a leaf there is one path.
  EXPECT_EQ(visited(t, router.path(t.gpu_of_rank(0), t.gpu_of_rank(1))),
            (std::vector<std::string>{"leaf0", "gpu1"}));
}

// Where equally cheap paths part at a GPU (NVSwitch then a rail, or a rail then NVSwitch), the
// first one found stays: only parallel switches are spread.
TEST(Router, KeepsTheFirstPathWhereTiesAreNotBetweenSwitches) {
  const Topology t = load_topology("a100x2");
  Router router(t);
  const auto once = router.path(t.gpu_of_rank(0), t.gpu_of_rank(9));
  Router again(t);
  EXPECT_EQ(again.path(t.gpu_of_rank(0), t.gpu_of_rank(9)), once);
  for (LinkId l : once) EXPECT_NE(t.node(t.link(l).dst).id.rfind("spine", 0), 0u);
}

}  // namespace
}  // namespace optiflow::topology
