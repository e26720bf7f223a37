#include "optiflow/topology/topology_io.hpp"

#include <gtest/gtest.h>

#include "optiflow/support/error.hpp"
#include "optiflow/topology/generators.hpp"

namespace optiflow::topology {
namespace {

constexpr const char* kRing4 = R"({ "name": "ring4",
  "nodes": [ {"id": "g0", "kind": "gpu", "rank": 0, "host": 0, "local": 0},
             {"id": "g1", "kind": "gpu", "rank": 1, "host": 0, "local": 1},
             {"id": "sw0", "kind": "switch", "comment": "unknown fields are ignored"} ],
  "links": [ {"src": "g0", "dst": "sw0", "bw_GBps": 300, "alpha_us": 0.7,
              "kind": "nvlink", "bidirectional": true},
             {"src": "g1", "dst": "sw0", "bw_GBps": 300, "alpha_us": 0.7, "kind": "nvlink"},
             {"src": "sw0", "dst": "g1", "bw_GBps": 150, "alpha_us": 0.7, "kind": "nvlink"} ] })";

TEST(TopologyJson, ReadsTheDesignExample) {
  const Topology topo = parse_topology_json(kRing4, "ring4.json");
  EXPECT_EQ(topo.name(), "ring4");
  EXPECT_EQ(topo.rank_count(), 2);
  ASSERT_EQ(topo.link_count(), 4u);  // the bidirectional link counts twice
  EXPECT_EQ(topo.link(1).src, 2u);
  EXPECT_EQ(topo.link(1).dst, 0u);
  EXPECT_EQ(topo.link(3).bw_GBps, 150);
  EXPECT_EQ(topo.link(0).kind, LinkKind::nvlink);
}

TEST(TopologyJson, RoundTripsEveryBuiltin) {
  for (const char* name : {"a100x4", "a100x4-degraded", "dgx1", "ndv2x2", "ring5", "torus3x4",
                           "fullmesh4", "fattree10"}) {
    const Topology topo = *make_builtin_topology(name);
    const std::string text = write_topology_json(topo);
    EXPECT_EQ(parse_topology_json(text, name), topo) << name;
    EXPECT_EQ(write_topology_json(parse_topology_json(text, name)), text) << name;
  }
}

// A fitted machine's runtime costs survive writing and reading; a message takes the first band
// that holds it, the last band every larger one.
TEST(TopologyJson, RoundTripsARuntimesCostsByMessageSize) {
  Topology topo = make_fullmesh(2);
  topo.set_runtime(
      RuntimeCosts{7.5, {MessageBand{4096, 0.5, 1.0}, MessageBand{0, 2.0, 0.25}}, true});
  const Topology back = parse_topology_json(write_topology_json(topo), "t.json");
  EXPECT_EQ(back, topo);
  ASSERT_TRUE(back.runtime());
  EXPECT_DOUBLE_EQ(back.runtime()->band_for(4096)->alpha_us, 0.5);
  EXPECT_DOUBLE_EQ(back.runtime()->band_for(4097)->bw_factor, 0.25);
  EXPECT_DOUBLE_EQ(back.runtime()->band_for(1e12)->bw_factor, 0.25);
}

TEST(TopologyJson, MissingNameDefaultsToTheFileStem) {
  const Topology topo = parse_topology_json(
      R"({"nodes": [{"id": "a", "kind": "gpu", "rank": 0}], "links": []})", "dir/mine.json");
  EXPECT_EQ(topo.name(), "mine");
}

struct BadCase {
  const char* text;
  const char* expected;
};

class TopologyJsonErrors : public ::testing::TestWithParam<BadCase> {};

TEST_P(TopologyJsonErrors, NameTheFileAndField) {
  try {
    parse_topology_json(GetParam().text, "bad.json");
    FAIL() << "accepted: " << GetParam().text;
  } catch (const support::InputError& e) {
    const std::string message = e.what();
    EXPECT_EQ(message.rfind("bad.json", 0), 0u) << message;
    EXPECT_NE(message.find(GetParam().expected), std::string::npos) << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << "one line: " << message;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cases, TopologyJsonErrors,
    ::testing::Values(
        BadCase{"{\"nodes\": [", "bad.json:1:"},
        BadCase{"{\n  \"nodes\": [],\n  \"links\": [,]\n}", "bad.json:3:"},
        BadCase{"[]", "must be an object"}, BadCase{R"({"links": []})", "nodes: missing"},
        BadCase{R"({"nodes": [{"id": "a", "kind": "gpu", "rank": 0}]})", "links: missing"},
        BadCase{R"({"nodes": [{"kind": "gpu", "rank": 0}], "links": []})", "nodes[0].id: missing"},
        BadCase{R"({"nodes": [{"id": "a", "kind": "tpu", "rank": 0}], "links": []})",
                "nodes[0].kind: unknown node kind 'tpu'"},
        BadCase{R"({"nodes": [{"id": "a", "kind": "gpu"}], "links": []})", "nodes[0].rank"},
        BadCase{R"({"nodes": [{"id": "a", "kind": "gpu", "rank": "zero"}], "links": []})",
                "nodes[0].rank: must be an integer"},
        BadCase{R"({"nodes": [{"id": "a", "kind": "gpu", "rank": 0}, {"id": "a", "kind": "switch"}],
                    "links": []})",
                "nodes[1].id: duplicate"},
        BadCase{R"({"nodes": [{"id": "a", "kind": "gpu", "rank": 0}],
                    "links": [{"src": "a", "dst": "b", "bw_GBps": 1}]})",
                "links[0].dst: no node has id 'b'"},
        BadCase{R"({"nodes": [{"id": "a", "kind": "gpu", "rank": 0}, {"id": "b", "kind": "switch"}],
                    "links": [{"src": "a", "dst": "b"}]})",
                "links[0].bw_GBps: missing"},
        BadCase{R"({"nodes": [{"id": "a", "kind": "gpu", "rank": 0}], "links": [],
                    "runtime": {"messages": [{"bw_factor": 1.5}]}})",
                "runtime.messages[0].bw_factor: must be in (0, 1]"},
        BadCase{R"({"nodes": [{"id": "a", "kind": "gpu", "rank": 0}], "links": [],
                    "runtime": {"messages": [{"max_bytes": 64}, {"max_bytes": 8}]}})",
                "runtime.messages[1].max_bytes: bands must be in ascending order"},
        BadCase{R"({"nodes": [{"id": "a", "kind": "gpu", "rank": 0}], "links": [],
                    "runtime": {"messages": [{"alpha_us": 1}, {"max_bytes": 8}]}})",
                "runtime.messages[0].max_bytes: only the last band"},
        BadCase{R"({"nodes": [{"id": "a", "kind": "gpu", "rank": 0}], "links": [],
                    "runtime": {"launch_us": "x"}})",
                "runtime.launch_us: must be a number"},
        BadCase{R"({"nodes": [{"id": "a", "kind": "gpu", "rank": 0}], "links": [],
                    "runtime": {"serial_steps": 1}})",
                "runtime.serial_steps: must be true or false"},
        BadCase{R"({"nodes": [{"id": "a", "kind": "gpu", "rank": 0}, {"id": "b", "kind": "switch"}],
                    "links": [{"src": "a", "dst": "b", "bw_GBps": 0}]})",
                "links[0].bw_GBps: must be a positive"},
        BadCase{R"({"nodes": [{"id": "a", "kind": "gpu", "rank": 0}, {"id": "b", "kind": "switch"}],
                    "links": [{"src": "a", "dst": "b", "bw_GBps": 1, "alpha_us": -2}]})",
                "links[0].alpha_us"},
        BadCase{R"({"nodes": [{"id": "a", "kind": "gpu", "rank": 0}, {"id": "b", "kind": "switch"}],
                    "links": [{"src": "a", "dst": "b", "bw_GBps": 1, "kind": "warp"}]})",
                "links[0].kind: unknown link kind 'warp'"},
        BadCase{R"({"nodes": [{"id": "a", "kind": "gpu", "rank": 1}], "links": []})",
                "no gpu has rank 0"},
        BadCase{R"({"nodes": [{"id": "s", "kind": "switch"}], "links": []})", "has no gpu"},
        // Named "x", but the error names the file: the bound would only know "x".
        BadCase{R"({"name": "x", "nodes": [{"id": "a", "kind": "gpu", "rank": 0},
                                           {"id": "b", "kind": "gpu", "rank": 1}],
                    "links": [{"src": "a", "dst": "b", "bw_GBps": 1}]})",
                "links: no link leads from rank 1 to the other GPUs"},
        BadCase{R"({"name": "x", "nodes": [{"id": "a", "kind": "gpu", "rank": 0},
                                           {"id": "b", "kind": "gpu", "rank": 1},
                                           {"id": "c", "kind": "gpu", "rank": 2}],
                    "links": [{"src": "a", "dst": "b", "bw_GBps": 1, "bidirectional": true},
                              {"src": "c", "dst": "a", "bw_GBps": 1}]})",
                "links: no link leads from ranks 0-1 to the other GPUs"}));

TEST(TopologyJson, LoadTopologyRejectsUnknownNames) {
  EXPECT_THROW(load_topology("no-such-topology"), support::InputError);
  EXPECT_THROW(load_topology("ring1"), support::InputError);
  EXPECT_EQ(load_topology("ring3").rank_count(), 3);
}

}  // namespace
}  // namespace optiflow::topology
