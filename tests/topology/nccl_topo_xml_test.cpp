// Tests for the NCCL topology XML importer: small inline files for each rule, then the real
// files shipped with Azure HPC images and msccl-executor-nccl.
#include "optiflow/topology/nccl_topo_xml.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>

#include "optiflow/support/error.hpp"

namespace optiflow::topology {
namespace {

// Line rate of PCIe Gen4 x16: 16 GT/s x 16 lanes x 128/130 / 8.
constexpr double kGen4x16GBps = 16.0 * 16 * 128.0 / 130.0 / 8.0;

// The links from node `src` to node `dst`, by id.
std::vector<Link> links_between(const Topology& topo, std::string_view src, std::string_view dst) {
  std::vector<Link> out;
  const auto s = topo.find_node(src);
  const auto d = topo.find_node(dst);
  if (!s || !d) return out;
  for (const Link& link : topo.links())
    if (link.src == *s && link.dst == *d) out.push_back(link);
  return out;
}

int count_kind(const Topology& topo, NodeKind kind) {
  return static_cast<int>(std::count_if(topo.nodes().begin(), topo.nodes().end(),
                                        [&](const Node& n) { return n.kind == kind; }));
}

int count_links(const Topology& topo, LinkKind kind) {
  return static_cast<int>(std::count_if(topo.links().begin(), topo.links().end(),
                                        [&](const Link& l) { return l.kind == kind; }));
}

bool has_note(const NcclImportResult& result, std::string_view part) {
  return std::any_of(result.notes.begin(), result.notes.end(),
                     [&](const std::string& note) { return note.find(part) != std::string::npos; });
}

// Imports `xml` and returns the error message; fails the test if it imports.
std::string import_error(const std::string& xml, const NcclImportOptions& options = {}) {
  try {
    import_nccl_topology_xml(xml, "bad.xml", options);
  } catch (const support::InputError& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected an InputError for:\n" << xml;
  return {};
}

// Two A100s joined by 12 NVLinks; ranks given in the reverse of bus-id order.
constexpr const char* kNvlinkPair = R"(<system version="1">
  <cpu numaid="0" arch="x86_64" vendor="AuthenticAMD" familyid="23" modelid="49">
    <pci busid="0000:07:00.0" class="0x030200" link_speed="16.0 GT/s PCIe" link_width="16">
      <gpu dev="0" sm="80" rank="1" gdr="1">
        <nvlink target="0000:0f:00.0" count="12" tclass="0x030200"/>
      </gpu>
    </pci>
    <pci busid="0000:0f:00.0" class="0x030200" link_speed="16.0 GT/s PCIe" link_width="16">
      <gpu dev="1" sm="80" rank="0" gdr="1">
        <nvlink target="0000:07:00.0" count="12" tclass="0x030200"/>
      </gpu>
    </pci>
  </cpu>
</system>
)";

TEST(NcclTopoXml, NvlinksBetweenPeersAreDirectedAndRanksComeFromTheXml) {
  const NcclImportResult result = import_nccl_topology_xml(kNvlinkPair, "dir/pair.xml");
  const Topology& topo = result.topology;
  EXPECT_EQ(topo.name(), "pair");
  ASSERT_EQ(topo.rank_count(), 2);
  // rank="0" is the second <pci> (bus 0f).
  EXPECT_EQ(topo.node(topo.gpu_of_rank(0)).id, "h0.gpu0");
  EXPECT_EQ(links_between(topo, "h0.gpu0", "h0.cpu0").size(), 1u);
  const auto forward = links_between(topo, "h0.gpu0", "h0.gpu1");
  const auto backward = links_between(topo, "h0.gpu1", "h0.gpu0");
  ASSERT_EQ(forward.size(), 1u);
  ASSERT_EQ(backward.size(), 1u);
  EXPECT_EQ(forward[0].kind, LinkKind::nvlink);
  EXPECT_DOUBLE_EQ(forward[0].bw_GBps, 12 * 20.0);  // NCCL's SM80_NVLINK_BW per link
  EXPECT_DOUBLE_EQ(forward[0].alpha_us, 0.3);
  EXPECT_EQ(count_links(topo, LinkKind::nvlink), 2);
  EXPECT_FALSE(has_note(result, "PCIe only"));
  EXPECT_FALSE(has_note(result, "bus-id order"));
  EXPECT_EQ(topo.find_node("net"), std::nullopt);  // no NICs, no network
}

TEST(NcclTopoXml, NvlinksToNvswitchChipsMeetOnOneSwitchPerHost) {
  const std::string xml = R"(<system version="1">
  <cpu numaid="0" arch="x86_64" vendor="GenuineIntel" familyid="6" modelid="143">
    <pci busid="0000:18:00.0" class="0x030200" link_speed="32.0 GT/s PCIe" link_width="16">
      <gpu dev="0" sm="90" rank="0" gdr="1">
        <nvlink target="0000:05:00.0" count="9" tclass="0x068000"/>
        <nvlink target="0000:06:00.0" count="9" tclass="0x068000"/>
      </gpu>
    </pci>
    <pci busid="0000:2a:00.0" class="0x030200" link_speed="32.0 GT/s PCIe" link_width="16">
      <gpu dev="1" sm="90" rank="1" gdr="1">
        <nvlink target="0000:05:00.0" count="9" tclass="0x068000"/>
        <nvlink target="0000:06:00.0" count="9" tclass="0x068000"/>
      </gpu>
    </pci>
  </cpu>
</system>)";
  const Topology topo = import_nccl_topology_xml(xml, "h100.xml").topology;
  ASSERT_TRUE(topo.find_node("h0.nvswitch"));
  EXPECT_EQ(topo.node(*topo.find_node("h0.nvswitch")).kind, NodeKind::switch_);
  for (const char* gpu : {"h0.gpu0", "h0.gpu1"}) {
    const auto up = links_between(topo, gpu, "h0.nvswitch");
    const auto down = links_between(topo, "h0.nvswitch", gpu);
    ASSERT_EQ(up.size(), 1u) << gpu;
    ASSERT_EQ(down.size(), 1u) << gpu;
    EXPECT_EQ(up[0].kind, LinkKind::nvswitch);
    // H100: 9 + 9 links x NCCL's SM90_NVLINK_BW (20.6), exactly 18 x 20.6 = 370.8.
    EXPECT_EQ(up[0].bw_GBps, 370.8);
    EXPECT_EQ(down[0].bw_GBps, 370.8);
  }
  EXPECT_TRUE(links_between(topo, "h0.gpu0", "h0.gpu1").empty());
  // 32 GT/s x16 at 128b/130b.
  EXPECT_NEAR(links_between(topo, "h0.gpu0", "h0.cpu0")[0].bw_GBps, 63.0, 0.1);
}

// Azure style: GPUs and NICs known only by PCI class, bus ids out of order under a bridge.
constexpr const char* kClassOnly = R"(<system version="1">
  <cpu numaid="0" affinity="0000ffff" arch="x86_64" vendor="GenuineIntel" familyid="6" modelid="85">
    <pci busid="ffff:ff:01.0" class="0x060400" link_speed="16 GT/s" link_width="16">
      <pci busid="0003:00:00.0" class="0x030200" link_speed="16 GT/s" link_width="16"/>
      <pci busid="0102:00:00.0" class="0x020700" link_speed="16 GT/s" link_width="16"/>
      <pci busid="0001:00:00.0" class="0x030200" link_speed="8 GT/s" link_width="8"/>
    </pci>
  </cpu>
  <cpu numaid="1" affinity="ffff0000" arch="x86_64" vendor="GenuineIntel" familyid="6" modelid="85">
    <pci busid="0002:00:00.0" class="0x030200" link_speed="16 GT/s" link_width="16"/>
    <pci busid="0101:00:00.0" class="0x020700" link_speed="16 GT/s" link_width="16"/>
  </cpu>
</system>
)";

TEST(NcclTopoXml, ClassOnlyGpusAreRankedByBusIdOverPcie) {
  const NcclImportResult result = import_nccl_topology_xml(kClassOnly, "azure.xml");
  const Topology& topo = result.topology;
  ASSERT_EQ(topo.rank_count(), 3);
  EXPECT_EQ(topo.host_count(), 1);
  // Bus 0001 -> rank 0 (under the bridge), 0002 -> rank 1 (cpu1), 0003 -> rank 2 (bridge).
  EXPECT_EQ(links_between(topo, "h0.gpu0", "h0.pcisw0").size(), 1u);
  EXPECT_EQ(links_between(topo, "h0.gpu1", "h0.cpu1").size(), 1u);
  EXPECT_EQ(links_between(topo, "h0.gpu2", "h0.pcisw0").size(), 1u);
  EXPECT_EQ(topo.node(topo.gpu_of_rank(2)).local, 2);
  const Link bridge = links_between(topo, "h0.pcisw0", "h0.cpu0").at(0);
  EXPECT_EQ(bridge.kind, LinkKind::pcie);
  EXPECT_DOUBLE_EQ(bridge.bw_GBps, kGen4x16GBps);
  EXPECT_DOUBLE_EQ(bridge.alpha_us, 0.5);
  // Gen3 x8: 8 GT/s x 8 x 128/130 / 8.
  EXPECT_DOUBLE_EQ(links_between(topo, "h0.gpu0", "h0.pcisw0")[0].bw_GBps, 8.0 * 128 / 130);
  // NICs are numbered by bus id too: 0101 (cpu1) is nic0.
  EXPECT_EQ(links_between(topo, "h0.nic0", "h0.cpu1").size(), 1u);
  const Link uplink = links_between(topo, "h0.nic1", "net").at(0);
  EXPECT_EQ(uplink.kind, LinkKind::ib);
  EXPECT_DOUBLE_EQ(uplink.bw_GBps, 25.0);
  // Skylake sockets: NCCL's SKL_QPI_BW.
  const Link socket = links_between(topo, "h0.cpu0", "h0.cpu1").at(0);
  EXPECT_EQ(socket.kind, LinkKind::cpu);
  EXPECT_DOUBLE_EQ(socket.bw_GBps, 10.0);
  EXPECT_EQ(count_links(topo, LinkKind::nvlink) + count_links(topo, LinkKind::nvswitch), 0);
  EXPECT_TRUE(has_note(result, "bus-id order"));
  EXPECT_TRUE(has_note(result, "PCIe only"));
  EXPECT_TRUE(has_note(result, "2 NICs without <net speed> taken as 25 GB/s"));
  EXPECT_TRUE(has_note(result, "GPU generation is unknown, no <gpu sm> in the file"));
}

TEST(NcclTopoXml, NvswitchOptionAddsAFabricWhenTheFileHasNoNvlinks) {
  NcclImportOptions options;
  options.nvswitch_GBps = 300;
  options.nic_GBps = 50;
  options.name = "ndv4ish";
  const NcclImportResult result = import_nccl_topology_xml(kClassOnly, "azure.xml", options);
  const Topology& topo = result.topology;
  EXPECT_EQ(topo.name(), "ndv4ish");
  for (const char* gpu : {"h0.gpu0", "h0.gpu1", "h0.gpu2"}) {
    const auto up = links_between(topo, gpu, "h0.nvswitch");
    ASSERT_EQ(up.size(), 1u) << gpu;
    EXPECT_EQ(up[0].kind, LinkKind::nvswitch);
    EXPECT_DOUBLE_EQ(up[0].bw_GBps, 300.0);
    EXPECT_EQ(links_between(topo, "h0.nvswitch", gpu).size(), 1u);
  }
  EXPECT_DOUBLE_EQ(links_between(topo, "h0.nic0", "net").at(0).bw_GBps, 50.0);
  EXPECT_TRUE(has_note(result, "added an NVSwitch at 300"));
  EXPECT_FALSE(has_note(result, "PCIe only"));
}

TEST(NcclTopoXml, NicDirectlyUnderCpuUsesNetSpeedAndDefaultPcie) {
  // NCv4 style: empty link_speed, link_width 0, and a <nic> with no <pci> parent.
  const std::string xml = R"(<system version="1">
  <cpu numaid="0" arch="x86_64" vendor="AuthenticAMD" familyid="175" modelid="1">
    <pci busid="0001:00:00.0" class="0x030200" link_speed="" link_width="0">
      <gpu dev="0" sm="80" rank="0" gdr="1"/>
    </pci>
    <nic>
      <net name="eth0" dev="0" speed="100000" port="0" latency="0.000000" guid="0x0"/>
    </nic>
  </cpu>
</system>)";
  const NcclImportResult result = import_nccl_topology_xml(xml, "ncv4.xml");
  const Topology& topo = result.topology;
  EXPECT_DOUBLE_EQ(links_between(topo, "h0.gpu0", "h0.cpu0").at(0).bw_GBps, kGen4x16GBps);
  EXPECT_DOUBLE_EQ(links_between(topo, "h0.nic0", "h0.cpu0").at(0).bw_GBps, kGen4x16GBps);
  const Link uplink = links_between(topo, "h0.nic0", "net").at(0);
  EXPECT_EQ(uplink.kind, LinkKind::ethernet);
  EXPECT_DOUBLE_EQ(uplink.bw_GBps, 12.5);  // 100000 Mb/s
  EXPECT_TRUE(has_note(result, "2 PCIe links without link_speed or link_width"));
  EXPECT_TRUE(has_note(result, "1 NIC at the file's <net speed> (12.5 GB/s)"));
  EXPECT_FALSE(has_note(result, "without <net speed>"));
}

TEST(NcclTopoXml, ChildPciWithoutFiguresInheritsItsBridge) {
  const std::string xml = R"(<system version="1">
  <cpu numaid="0" arch="x86_64" vendor="GenuineIntel" familyid="6" modelid="85">
    <pci busid="0000:10:00.0" class="0x060400" link_speed="8.0 GT/s PCIe" link_width="16">
      <pci busid="0000:11:00.0" class="0x030200" link_speed="" link_width="0"/>
    </pci>
  </cpu>
</system>)";
  const NcclImportResult result = import_nccl_topology_xml(xml, "gen3.xml");
  EXPECT_DOUBLE_EQ(links_between(result.topology, "h0.gpu0", "h0.pcisw0").at(0).bw_GBps,
                   8.0 * 16 * 128 / 130 / 8);
  EXPECT_FALSE(has_note(result, "PCIe links without"));
}

TEST(NcclTopoXml, HostsAreReplicatedAndJoinedThroughNet) {
  NcclImportOptions options;
  options.hosts = 2;
  const std::string xml = R"(<system version="1">
  <cpu numaid="0" arch="x86_64" vendor="AuthenticAMD">
    <pci busid="ffff:ff:01.0" class="0x060400" link_speed="16 GT/s" link_width="16">
)" + [] {
    std::string pcis;
    for (int i = 0; i < 8; ++i) {
      pcis += "      <pci busid=\"000" + std::to_string(i) + ":00:00.0\" class=\"0x030200\" " +
              "link_speed=\"16 GT/s\" link_width=\"16\"/>\n";
      pcis += "      <pci busid=\"010" + std::to_string(i) + ":00:00.0\" class=\"0x020700\" " +
              "link_speed=\"16 GT/s\" link_width=\"16\"/>\n";
    }
    return pcis;
  }() + "    </pci>\n  </cpu>\n</system>\n";
  const NcclImportResult result = import_nccl_topology_xml(xml, "eight.xml", options);
  const Topology& topo = result.topology;
  ASSERT_EQ(topo.rank_count(), 16);
  EXPECT_EQ(topo.host_count(), 2);
  for (int rank = 0; rank < 16; ++rank) {
    const Node& gpu = topo.node(topo.gpu_of_rank(rank));
    EXPECT_EQ(gpu.host, rank / 8);
    EXPECT_EQ(gpu.local, rank % 8);
    EXPECT_EQ(gpu.id, "h" + std::to_string(rank / 8) + ".gpu" + std::to_string(rank % 8));
  }
  ASSERT_TRUE(topo.find_node("net"));
  EXPECT_EQ(topo.node(*topo.find_node("net")).kind, NodeKind::switch_);
  EXPECT_EQ(count_kind(topo, NodeKind::nic), 16);
  for (int host = 0; host < 2; ++host) {
    for (int nic = 0; nic < 8; ++nic) {
      const std::string id = "h" + std::to_string(host) + ".nic" + std::to_string(nic);
      EXPECT_EQ(links_between(topo, id, "net").size(), 1u) << id;
      EXPECT_EQ(links_between(topo, "net", id).size(), 1u) << id;
      EXPECT_EQ(topo.node(*topo.find_node(id)).host, host);
    }
  }
  EXPECT_TRUE(has_note(result, "replicated 2 times"));
  // Same input, same topology, node for node and link for link.
  EXPECT_EQ(import_nccl_topology_xml(xml, "eight.xml", options).topology, topo);
}

// One GPU of `sm` (none when empty) and a NIC with the given <net speed> (none when empty),
// the NIC first in document order: its default must wait for the GPUs.
std::string gpu_and_nic(const std::string& sm, const std::string& speed,
                        const std::string& second_sm = "") {
  const std::string net = speed.empty() ? "" : "<net name=\"mlx5_0\" speed=\"" + speed + "\"/>";
  auto gpu = [](const std::string& busid, const std::string& gpu_sm) {
    return "    <pci busid=\"" + busid + "\" class=\"0x030200\" link_speed=\"16 GT/s\" " +
           "link_width=\"16\">" + (gpu_sm.empty() ? "" : "<gpu sm=\"" + gpu_sm + "\"/>") +
           "</pci>\n";
  };
  return "<system version=\"1\">\n  <cpu numaid=\"0\" arch=\"x86_64\" vendor=\"AuthenticAMD\">\n"
         "    <pci busid=\"0000:01:00.0\" class=\"0x020700\" link_speed=\"16 GT/s\" "
         "link_width=\"16\"><nic>" +
         net + "</nic></pci>\n" + gpu("0000:02:00.0", sm) +
         (second_sm.empty() ? "" : gpu("0000:03:00.0", second_sm)) + "  </cpu>\n</system>\n";
}

double nic_GBps(const NcclImportResult& result) {
  return links_between(result.topology, "h0.nic0", "net").at(0).bw_GBps;
}

TEST(NcclTopoXml, NicWithoutSpeedTakesItsGpuGenerationsDefault) {
  struct Case {
    std::string sm, second_sm;
    double GBps;
    std::string note;
  };
  const Case cases[] = {
      {"70", "", 12.5,
       "1 NIC without <net speed> taken as 12.5 GB/s, the GPU-generation default "
       "for sm70 (EDR InfiniBand, 100 Gb/s, as NDv2"},
      {"80", "", 25.0, "25 GB/s, the GPU-generation default for sm80 (HDR InfiniBand"},
      {"86", "80", 25.0, "the GPU-generation default for sm86 (HDR"},
      {"90", "", 50.0,
       "50 GB/s, the GPU-generation default for sm90 (NDR InfiniBand, 400 Gb/s, "
       "as NDv5 and DGX-H100"},
      {"", "", 25.0,
       "25 GB/s (HDR InfiniBand, 200 Gb/s): the GPU generation is unknown, no "
       "<gpu sm> in the file; see --nic-GBps"},
      {"80", "90", 25.0, "GPU generation is unknown, the GPUs' sm are of different generations"},
      {"100", "", 25.0, "GPU generation is unknown, no NIC default for sm100"},
      {"60", "", 25.0, "GPU generation is unknown, no NIC default for sm60"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE("sm " + c.sm + " " + c.second_sm);
    const NcclImportResult result =
        import_nccl_topology_xml(gpu_and_nic(c.sm, "", c.second_sm), "gen.xml");
    EXPECT_DOUBLE_EQ(nic_GBps(result), c.GBps);
    EXPECT_TRUE(has_note(result, c.note)) << ::testing::PrintToString(result.notes);
    EXPECT_FALSE(has_note(result, "file's <net speed>"));
  }
}

TEST(NcclTopoXml, NetSpeedInTheFileBeatsTheGenerationDefault) {
  const NcclImportResult result = import_nccl_topology_xml(gpu_and_nic("90", "200000"), "f.xml");
  EXPECT_DOUBLE_EQ(nic_GBps(result), 25.0);  // 200000 Mb/s, not NDR's 50
  EXPECT_TRUE(has_note(result, "1 NIC at the file's <net speed> (25 GB/s)"));
  EXPECT_FALSE(has_note(result, "without <net speed>"));
}

TEST(NcclTopoXml, NicGBpsOverridesEveryNicAndSaysSo) {
  NcclImportOptions options;
  options.nic_GBps = 40;
  const NcclImportResult with_speed =
      import_nccl_topology_xml(gpu_and_nic("90", "200000"), "f.xml", options);
  EXPECT_DOUBLE_EQ(nic_GBps(with_speed), 40.0);
  EXPECT_TRUE(has_note(with_speed,
                       "1 NIC taken as 40 GB/s (--nic-GBps, for every NIC; it "
                       "overrides the <net speed> of 1 NIC)"));
  EXPECT_FALSE(has_note(with_speed, "file's <net speed>"));
  EXPECT_FALSE(has_note(with_speed, "GPU-generation default"));
  const NcclImportResult without_speed =
      import_nccl_topology_xml(gpu_and_nic("70", ""), "f.xml", options);
  EXPECT_DOUBLE_EQ(nic_GBps(without_speed), 40.0);
  EXPECT_TRUE(has_note(without_speed, "1 NIC taken as 40 GB/s (--nic-GBps, for every NIC)"));
  EXPECT_FALSE(has_note(without_speed, "GPU-generation default"));
}

// NCCL's per-link NVLink figures, chosen by sm as ncclTopoNVLinkBw does.
TEST(NcclTopoXml, NvlinkFiguresAreNcclsPerSm) {
  const std::pair<std::string, double> cases[] = {
      {"60", 18.0}, {"70", 20.0}, {"75", 20.0},  {"80", 20.0}, {"86", 12.0},
      {"89", 20.0}, {"90", 20.6}, {"100", 40.1}, {"52", 20.0}, {"", 20.0}};
  for (const auto& [sm, per_link] : cases) {
    SCOPED_TRACE("sm " + sm);
    std::string xml = kNvlinkPair;
    const std::string attribute = sm.empty() ? "" : "sm=\"" + sm + "\"";
    for (std::size_t at = xml.find(R"(sm="80")"); at != std::string::npos;
         at = xml.find(R"(sm="80")", at + attribute.size()))
      xml.replace(at, 7, attribute);
    const NcclImportResult result = import_nccl_topology_xml(xml, "pair.xml");
    EXPECT_DOUBLE_EQ(links_between(result.topology, "h0.gpu0", "h0.gpu1").at(0).bw_GBps,
                     12 * per_link);
    EXPECT_EQ(has_note(result, "a <gpu> without sm"), sm.empty());
  }
}

TEST(NcclTopoXml, MalformedXmlNamesTheFileAndLine) {
  const std::string message =
      import_error("<system version=\"1\">\n  <cpu numaid=\"0\">\n    <pci>\n  </cpu>\n</system>");
  // tinyxml2 reports the line of the element left open.
  EXPECT_NE(message.find("bad.xml:3:"), std::string::npos) << message;
  EXPECT_NE(message.find("malformed XML"), std::string::npos) << message;
}

TEST(NcclTopoXml, GraphFileIsRejectedAsSuch) {
  const std::string message =
      import_error("<graphs version=\"1\">\n  <graph id=\"0\" pattern=\"4\"/>\n</graphs>\n");
  EXPECT_NE(message.find("graph file"), std::string::npos) << message;
  EXPECT_NE(message.find("not a topology file"), std::string::npos) << message;
  EXPECT_NE(import_error("<topology/>").find("must be <system>"), std::string::npos);
}

TEST(NcclTopoXml, PciWithoutBusidIsLocated) {
  const std::string message = import_error(R"(<system version="1">
  <cpu numaid="0" arch="x86_64" vendor="GenuineIntel">
    <pci class="0x030200" link_speed="16 GT/s" link_width="16"/>
  </cpu>
</system>)");
  EXPECT_NE(message.find("bad.xml:3:"), std::string::npos) << message;
  EXPECT_NE(message.find("<pci>.busid: missing"), std::string::npos) << message;
}

TEST(NcclTopoXml, NonNumericLinkWidthNamesTheAttribute) {
  try {
    import_nccl_topology_xml(R"(<system version="1">
  <cpu numaid="0" arch="x86_64" vendor="GenuineIntel">
    <pci busid="0001:00:00.0" class="0x030200" link_speed="16 GT/s" link_width="x16"/>
  </cpu>
</system>)",
                             "bad.xml");
    FAIL() << "expected an InputError";
  } catch (const support::InputError& e) {
    EXPECT_EQ(e.where().line, 3);
    EXPECT_EQ(e.where().field, "<pci busid=\"0001:00:00.0\">.link_width");
    EXPECT_NE(std::string(e.what()).find("'x16' is not an integer"), std::string::npos) << e.what();
  }
}

TEST(NcclTopoXml, OtherBadInputIsLocated) {
  const std::string cpu = "<system>\n<cpu numaid=\"0\" arch=\"x86_64\">\n";
  const std::string end = "</cpu>\n</system>";
  const std::string gpu = "<pci busid=\"0001:00:00.0\" class=\"0x030200\"/>\n";
  EXPECT_NE(import_error(cpu + gpu + gpu + end).find("duplicate bus id (also at line 3)"),
            std::string::npos);
  EXPECT_NE(import_error(cpu +
                         "<pci busid=\"0001:00:00.0\" class=\"0x030200\" "
                         "link_speed=\"fast\"/>\n" +
                         end)
                .find("link_speed: 'fast' is not a PCIe speed"),
            std::string::npos);
  EXPECT_NE(import_error(cpu + "<pci busid=\"zz:00.0\" class=\"0x030200\"/>\n" + end)
                .find("is not a PCI bus id"),
            std::string::npos);
  EXPECT_NE(import_error(cpu +
                         "<pci busid=\"0001:00:00.0\" class=\"0x030200\"><gpu sm=\"80\">"
                         "<nvlink target=\"0001:00:00.0\" count=\"2\" tclass=\"0x030200\"/>"
                         "</gpu></pci>\n" +
                         end)
                .find("to itself"),
            std::string::npos);
  EXPECT_NE(import_error(cpu +
                         "<pci busid=\"0001:00:00.0\" class=\"0x030200\"><gpu sm=\"80\">"
                         "<nvlink target=\"0002:00:00.0\" tclass=\"0x068000\"/>"
                         "</gpu></pci>\n" +
                         end)
                .find(".count: missing"),
            std::string::npos);
  EXPECT_NE(
      import_error(cpu + "<pci busid=\"0101:00:00.0\" class=\"0x020700\"/>\n" + end).find("no GPU"),
      std::string::npos);
  EXPECT_NE(import_error("<system><cpu arch=\"x86_64\"/></system>").find("<cpu>.numaid"),
            std::string::npos);
  NcclImportOptions zero_hosts;
  zero_hosts.hosts = 0;
  EXPECT_NE(import_error(cpu + gpu + end, zero_hosts).find("hosts"), std::string::npos);
}

TEST(NcclTopoXml, MissingFileIsAnInputError) {
  EXPECT_THROW(read_nccl_topology_file("/nonexistent/topo.xml"), support::InputError);
}

// The real files: what NCCL_TOPO_FILE points at on Azure HPC images, and msccl-executor-nccl's.
struct RealFile {
  int gpus;
  int nics;
};
const std::map<std::string, RealFile> kRealFiles = {{"ndv2-topo.xml", {8, 1}},
                                                    {"ndv4-topo.xml", {8, 8}},
                                                    {"ndv5-topo.xml", {8, 8}},
                                                    {"ncv4-topo.xml", {4, 1}}};

std::filesystem::path external_dir() {
  return OPTIFLOW_EXTERNAL_DIR;
}

TEST(NcclTopoXmlRealFiles, EveryTopoFileImports) {
  int imported = 0;
  for (const char* folder : {"azhpc-images", "msccl-executor-nccl"}) {
    const std::filesystem::path dir = external_dir() / folder;
    if (!std::filesystem::is_directory(dir)) continue;
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
      const std::string file = entry.path().filename().string();
      if (entry.path().extension() != ".xml" || file.find("topo") == std::string::npos) continue;
      SCOPED_TRACE(entry.path().string());
      const NcclImportResult result = read_nccl_topology_file(entry.path().string());
      EXPECT_NO_THROW(result.topology.validate());
      EXPECT_GT(result.topology.rank_count(), 0);
      if (const auto expected = kRealFiles.find(file); expected != kRealFiles.end()) {
        EXPECT_EQ(result.topology.rank_count(), expected->second.gpus);
        EXPECT_EQ(count_kind(result.topology, NodeKind::nic), expected->second.nics);
      }
      ++imported;
    }
  }
  if (imported == 0) GTEST_SKIP() << "no *topo*.xml under " << external_dir() << " (absent)";
}

// The Azure files (NDv2, NDv4, NDv5) list their GPUs by PCI class only: no <gpu sm>, no <net>.
const std::pair<const char*, double> kAzureFiles[] = {{"azhpc-images/ndv2-topo.xml", 12.5},
                                                      {"azhpc-images/ndv4-topo.xml", 25.0},
                                                      {"azhpc-images/ndv5-topo.xml", 50.0},
                                                      {"msccl-executor-nccl/ndv4-topo.xml", 25.0},
                                                      {"msccl-executor-nccl/ndv5-topo.xml", 50.0}};
const std::map<std::string, std::string> kAzureSm = {
    {"ndv2", "70"}, {"ndv4", "80"}, {"ndv5", "90"}};

std::vector<double> nic_speeds(const Topology& topo) {
  std::vector<double> out;
  const NodeId net = *topo.find_node("net");
  for (const Link& link : topo.links())
    if (link.dst == net) out.push_back(link.bw_GBps);
  return out;
}

// Gives every class-only GPU of an Azure file a <gpu sm>, as NCCL_TOPO_DUMP_FILE would write.
std::string with_gpu_sm(std::string xml, const std::string& sm) {
  const std::string gpu_class = R"(class="0x030200")";
  for (std::size_t at = xml.find(gpu_class); at != std::string::npos;
       at = xml.find(gpu_class, at + 1)) {
    const std::size_t end = xml.find("/>", at);
    xml.replace(end, 2, "><gpu sm=\"" + sm + "\"/></pci>");
  }
  return xml;
}

std::string read_all(const std::filesystem::path& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(NcclTopoXmlRealFiles, AzureNicsTakeTheUnknownGenerationDefaultOrTheOverride) {
  if (!std::filesystem::is_directory(external_dir()))
    GTEST_SKIP() << external_dir() << " is absent";
  int checked = 0;
  for (const auto& [file, generation_GBps] : kAzureFiles) {
    const std::filesystem::path path = external_dir() / file;
    if (!std::filesystem::exists(path)) continue;
    SCOPED_TRACE(path.string());
    const NcclImportResult plain = read_nccl_topology_file(path.string());
    const std::vector<double> speeds = nic_speeds(plain.topology);
    ASSERT_FALSE(speeds.empty());
    for (double speed : speeds) EXPECT_DOUBLE_EQ(speed, 25.0);
    EXPECT_TRUE(has_note(plain, std::to_string(speeds.size()) +
                                    (speeds.size() == 1 ? " NIC" : " NICs") +
                                    " without <net speed> taken as 25 GB/s (HDR InfiniBand, "
                                    "200 Gb/s): the GPU generation is unknown, no <gpu sm>"));
    // With the sm that NCCL_TOPO_DUMP_FILE would have written: the generation's default.
    const std::string stem = std::filesystem::path(file).stem().string().substr(0, 4);
    const NcclImportResult dumped =
        import_nccl_topology_xml(with_gpu_sm(read_all(path), kAzureSm.at(stem)), path.string());
    for (double speed : nic_speeds(dumped.topology)) EXPECT_DOUBLE_EQ(speed, generation_GBps);
    EXPECT_TRUE(has_note(dumped, "the GPU-generation default for sm" + kAzureSm.at(stem)));
    NcclImportOptions options;
    options.nic_GBps = 40;
    const NcclImportResult overridden = read_nccl_topology_file(path.string(), options);
    for (double speed : nic_speeds(overridden.topology)) EXPECT_DOUBLE_EQ(speed, 40.0);
    EXPECT_TRUE(has_note(overridden, "taken as 40 GB/s (--nic-GBps, for every NIC)"));
    ++checked;
  }
  if (checked == 0) GTEST_SKIP() << "no NDv2/NDv4/NDv5 topology file under " << external_dir();
}

TEST(NcclTopoXmlRealFiles, Ncv4NicKeepsItsNetSpeedUnlessOverridden) {
  const std::filesystem::path path = external_dir() / "msccl-executor-nccl" / "ncv4-topo.xml";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " is absent";
  const NcclImportResult plain = read_nccl_topology_file(path.string());
  EXPECT_EQ(nic_speeds(plain.topology), std::vector<double>{12.5});  // speed="100000" (Mb/s)
  EXPECT_TRUE(has_note(plain, "1 NIC at the file's <net speed> (12.5 GB/s)"));
  NcclImportOptions options;
  options.nic_GBps = 25;
  const NcclImportResult overridden = read_nccl_topology_file(path.string(), options);
  EXPECT_EQ(nic_speeds(overridden.topology), std::vector<double>{25.0});
  EXPECT_TRUE(has_note(overridden, "overrides the <net speed> of 1 NIC"));
}

TEST(NcclTopoXmlRealFiles, Ncv4HasNvlinksBetweenThePairs) {
  const std::filesystem::path path = external_dir() / "msccl-executor-nccl" / "ncv4-topo.xml";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " is absent";
  const Topology topo = read_nccl_topology_file(path.string()).topology;
  ASSERT_EQ(topo.rank_count(), 4);
  EXPECT_EQ(count_links(topo, LinkKind::nvlink), 4);
  for (const auto& [a, b] : {std::pair{"h0.gpu0", "h0.gpu1"}, std::pair{"h0.gpu2", "h0.gpu3"}}) {
    // 12 NVLink3 x NCCL's SM80_NVLINK_BW.
    EXPECT_DOUBLE_EQ(links_between(topo, a, b).at(0).bw_GBps, 240.0) << a << "->" << b;
    EXPECT_DOUBLE_EQ(links_between(topo, b, a).at(0).bw_GBps, 240.0) << b << "->" << a;
  }
  EXPECT_TRUE(links_between(topo, "h0.gpu0", "h0.gpu2").empty());
}

TEST(NcclTopoXmlRealFiles, Ncv4GraphFileIsRejected) {
  const std::filesystem::path path = external_dir() / "msccl-executor-nccl" / "ncv4-graph.xml";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " is absent";
  try {
    read_nccl_topology_file(path.string());
    FAIL() << "a graph file imported as a topology";
  } catch (const support::InputError& e) {
    EXPECT_EQ(e.where().file, path.string());
    EXPECT_NE(std::string(e.what()).find("graph file"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace optiflow::topology
