#include "optiflow/topology/generators.hpp"

#include <charconv>
#include <cmath>

#include "optiflow/support/error.hpp"

namespace optiflow::topology {
namespace {

// The figures of every built-in topology, in one place (docs/topologies.md has the full
// discussion). Bandwidths are per direction and achievable, not line rate (DESIGN.md, "The cost
// model"), each with its source:
//  - NVLink, per link: NCCL's SM70_NVLINK_BW = SM80_NVLINK_BW = 20.0 and SM90_NVLINK_BW = 20.6
//    GB/s (src/graph/topo.h, the same in NCCL 2.21.5 to 2.28.9; ncclTopoNVLinkBw picks by sm).
//    V100 (NVLink2): 20 per link, 40 for the doubled links of the cube-mesh; A100 (NVLink3):
//    12 links x 20 = 240 per GPU; H100 (NVLink4): 18 links x 20.6 = 370.8 per GPU. The line
//    rates are 25 GB/s per link (300 and 450 GB/s per GPU; NVIDIA architecture whitepapers).
//  - PCIe: NCCL's PCI_BW = 12.0 GB/s ("PCI Gen3 x16", topo.h) for the Gen3 x16 links of NDv2.
//    topo.h has no constant for Gen4 or Gen5, so those keep their line rates: Gen4 x16 = 16 GT/s
//    x 16 x 128/130 / 8 = 31.5, Gen5 x16 = 63 GB/s. (NCCL's own rule for PCIe links read from
//    sysfs, width x speed / 80 in topo.cc, would give 24 and 48.)
//  - NICs, line rates: HDR 200 Gb/s = 25, EDR 100 Gb/s = 12.5, NDR 400 Gb/s = 50 GB/s. NCCL
//    also takes the port's reported speed (<net speed> in Mb/s / 8000, filled from the IB
//    port's active speed x width), which is this line rate.
//  - Latencies: the per-hop latency of a transfer comes from the protocol table of the cost
//    model (NCCL's hwLat per link class and protocol, end to end per hop), so the links of the
//    DGX, NDv2 and dgx1 topologies have alpha 0, except the leaf-to-spine hop: 0.5 us for the
//    second switch hop, which NCCL's per-hop figure does not include. The abstract fabrics
//    (ring, torus, fullmesh, fattree) keep their alphas for closed-form checks.
constexpr double kSm70NvlinkGBps = 20.0;  // NCCL SM70_NVLINK_BW
constexpr double kSm80NvlinkGBps = 20.0;  // NCCL SM80_NVLINK_BW
constexpr double kSm90NvlinkGBps = 20.6;  // NCCL SM90_NVLINK_BW
constexpr int kA100NvlinksPerGpu = 12;
constexpr int kH100NvlinksPerGpu = 18;
constexpr double kNcclPciGBps = 12.0;                                       // NCCL PCI_BW, Gen3 x16
constexpr double kA100NvSwitchGBps = kA100NvlinksPerGpu * kSm80NvlinkGBps;  // 240
constexpr double kH100NvSwitchGBps = kH100NvlinksPerGpu * kSm90NvlinkGBps;  // 370.8
constexpr LinkSpec kNvSwitchA100{LinkKind::nvswitch, kA100NvSwitchGBps, 0.0};
constexpr LinkSpec kNvSwitchH100{LinkKind::nvswitch, kH100NvSwitchGBps, 0.0};
constexpr LinkSpec kPcieGen4{LinkKind::pcie, 31.5, 0.0};
constexpr LinkSpec kPcieGen5{LinkKind::pcie, 63.0, 0.0};
constexpr LinkSpec kHdrNic{LinkKind::ib, 25.0, 0.0};
constexpr LinkSpec kNdrNic{LinkKind::ib, 50.0, 0.0};
constexpr double kLeafSpineAlphaUs = 0.5;
constexpr LinkSpec kNvLink2{LinkKind::nvlink, kSm70NvlinkGBps, 0.0};
constexpr LinkSpec kPcieGen3{LinkKind::pcie, kNcclPciGBps, 0.0};
constexpr LinkSpec kEdrNic{LinkKind::ib, 12.5, 0.0};
// Abstract fabrics (ring, torus, fullmesh) for closed-form checks and studies.
constexpr LinkSpec kGenericLink{LinkKind::nvlink, 25.0, 1.0};
// fattree: one GPU per host, HDR to the leaf, full-bisection leaf-spine.
constexpr LinkSpec kFatTreeHostLink{LinkKind::ib, 25.0, 1.0};
constexpr LinkSpec kFatTreeUplink{LinkKind::ib, 25.0, 0.5};
// a100x4-degraded: this NIC runs at a quarter of HDR.
constexpr int kDegradedHost = 1;
constexpr int kDegradedLocal = 3;
constexpr double kDegradedFactor = 0.25;

constexpr int kGpusPerDgx = 8;

// DGX-1 (V100) hybrid cube-mesh: NVLinks between GPU pairs (2 = a doubled link), as printed by
// `nvidia-smi topo -m` on a DGX-1V.
constexpr int kDgx1Links[kGpusPerDgx][kGpusPerDgx] = {
    {0, 1, 1, 2, 2, 0, 0, 0}, {1, 0, 2, 1, 0, 2, 0, 0}, {1, 2, 0, 2, 0, 0, 1, 0},
    {2, 1, 2, 0, 0, 0, 0, 1}, {2, 0, 0, 0, 0, 1, 1, 2}, {0, 2, 0, 0, 1, 0, 2, 1},
    {0, 0, 1, 0, 1, 2, 0, 2}, {0, 0, 0, 1, 2, 1, 2, 0}};

std::string host_prefix(int host) {
  return "h" + std::to_string(host) + ".";
}

NodeId add_gpu(Topology& topo, std::string id, int rank, int host, int local) {
  return topo.add_node(Node{std::move(id), NodeKind::gpu, rank, host, local});
}

NodeId add_plain(Topology& topo, std::string id, NodeKind kind, int host = -1) {
  return topo.add_node(Node{std::move(id), kind, -1, host, -1});
}

LinkSpec scaled(LinkSpec spec, double factor) {
  spec.bw_GBps *= factor;
  return spec;
}

// Adds one DGX-1-style hybrid cube-mesh host; returns its GPUs in local order.
std::vector<NodeId> add_cube_mesh_host(Topology& topo, int host, const std::string& prefix) {
  std::vector<NodeId> gpus;
  for (int local = 0; local < kGpusPerDgx; ++local)
    gpus.push_back(add_gpu(topo, prefix + "gpu" + std::to_string(local), host * kGpusPerDgx + local,
                           host, local));
  for (int a = 0; a < kGpusPerDgx; ++a)
    for (int b = a + 1; b < kGpusPerDgx; ++b)
      if (kDgx1Links[a][b] > 0)
        topo.add_duplex(gpus[a], gpus[b], scaled(kNvLink2, kDgx1Links[a][b]));
  return gpus;
}

// One DGX generation: its GPU-to-NVSwitch, GPU-to-NIC and NIC-to-leaf links.
struct DgxFigures {
  LinkSpec nvswitch, pcie, nic;
  int sm;
};
constexpr DgxFigures kA100{kNvSwitchA100, kPcieGen4, kHdrNic, 80};
constexpr DgxFigures kH100{kNvSwitchH100, kPcieGen5, kNdrNic, 90};
constexpr int kV100Sm = 70;

// K DGX nodes: per host an NVSwitch and gpu0..7; with K > 1 one NIC per GPU over PCIe, NIC i of
// every host on rail leaf i, and the leaves on one spine with a non-blocking uplink.
Topology make_dgx_cluster(std::string name, int nodes, const DgxFigures& figures) {
  Topology topo(std::move(name));
  topo.set_gpu_sm(figures.sm);
  std::vector<NodeId> nics;
  for (int host = 0; host < nodes; ++host) {
    const std::string prefix = host_prefix(host);
    const NodeId nvswitch = add_plain(topo, prefix + "nvswitch", NodeKind::switch_, host);
    for (int local = 0; local < kGpusPerDgx; ++local) {
      const NodeId gpu = add_gpu(topo, prefix + "gpu" + std::to_string(local),
                                 host * kGpusPerDgx + local, host, local);
      topo.add_duplex(gpu, nvswitch, figures.nvswitch);
      if (nodes > 1) {
        const NodeId nic =
            add_plain(topo, prefix + "nic" + std::to_string(local), NodeKind::nic, host);
        topo.add_duplex(gpu, nic, figures.pcie);
        nics.push_back(nic);
      }
    }
  }
  if (nodes > 1) {
    const NodeId spine = add_plain(topo, "spine", NodeKind::switch_);
    const LinkSpec uplink{figures.nic.kind, figures.nic.bw_GBps * nodes, kLeafSpineAlphaUs};
    for (int rail = 0; rail < kGpusPerDgx; ++rail) {
      const NodeId leaf = add_plain(topo, "leaf" + std::to_string(rail), NodeKind::switch_);
      for (int host = 0; host < nodes; ++host)
        topo.add_duplex(nics[static_cast<std::size_t>(host * kGpusPerDgx + rail)], leaf,
                        figures.nic);
      topo.add_duplex(leaf, spine, uplink);
    }
  }
  return topo;
}

void require(bool ok, std::string_view name, const std::string& message) {
  if (!ok) throw support::InputError(support::SourceLocation{std::string(name), 0, 0, {}}, message);
}

// Parses "<prefix><int>" (returns nullopt if `name` does not have that shape).
std::optional<int> number_after(std::string_view name, std::string_view prefix) {
  if (!name.starts_with(prefix)) return std::nullopt;
  std::string_view digits = name.substr(prefix.size());
  int value = 0;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (ec != std::errc{} || end != digits.data() + digits.size() || digits.empty())
    return std::nullopt;
  return value;
}

constexpr int kMaxRanks = 1 << 16;

}  // namespace

Topology make_a100(int nodes) {
  return make_dgx_cluster("a100x" + std::to_string(nodes), nodes, kA100);
}

Topology make_h100(int nodes) {
  return make_dgx_cluster("h100x" + std::to_string(nodes), nodes, kH100);
}

Topology make_a100x4_degraded() {
  Topology base = make_a100(4);
  Topology topo("a100x4-degraded");
  topo.set_gpu_sm(base.gpu_sm());
  for (const Node& node : base.nodes()) topo.add_node(node);
  const std::string slow_nic = host_prefix(kDegradedHost) + "nic" + std::to_string(kDegradedLocal);
  for (const Link& link : base.links()) {
    LinkSpec spec{link.kind, link.bw_GBps, link.alpha_us};
    const bool touches_slow_nic =
        link.kind == LinkKind::ib &&
        (base.node(link.src).id == slow_nic || base.node(link.dst).id == slow_nic);
    if (touches_slow_nic) spec.bw_GBps *= kDegradedFactor;
    topo.add_link(link.src, link.dst, spec);
  }
  return topo;
}

Topology make_dgx1() {
  Topology topo("dgx1");
  topo.set_gpu_sm(kV100Sm);
  add_cube_mesh_host(topo, 0, "");
  return topo;
}

Topology make_ndv2(int nodes) {
  Topology topo("ndv2x" + std::to_string(nodes));
  topo.set_gpu_sm(kV100Sm);
  std::vector<NodeId> nics;
  for (int host = 0; host < nodes; ++host) {
    const std::string prefix = host_prefix(host);
    const std::vector<NodeId> gpus = add_cube_mesh_host(topo, host, prefix);
    const NodeId pcie = add_plain(topo, prefix + "pcie", NodeKind::switch_, host);
    for (NodeId gpu : gpus) topo.add_duplex(gpu, pcie, kPcieGen3);
    const NodeId nic = add_plain(topo, prefix + "nic0", NodeKind::nic, host);
    topo.add_duplex(pcie, nic, kPcieGen3);
    nics.push_back(nic);
  }
  if (nodes > 1) {
    const NodeId ib = add_plain(topo, "ibswitch", NodeKind::switch_);
    for (NodeId nic : nics) topo.add_duplex(nic, ib, kEdrNic);
  }
  return topo;
}

Topology make_ring(int ranks) {
  Topology topo("ring" + std::to_string(ranks));
  for (int r = 0; r < ranks; ++r) add_gpu(topo, "gpu" + std::to_string(r), r, 0, r);
  if (ranks == 2) {
    topo.add_duplex(0, 1, kGenericLink);
  } else {
    for (int r = 0; r < ranks; ++r)
      topo.add_duplex(static_cast<NodeId>(r), static_cast<NodeId>((r + 1) % ranks), kGenericLink);
  }
  return topo;
}

Topology make_torus(int x, int y) {
  Topology topo("torus" + std::to_string(x) + "x" + std::to_string(y));
  auto id = [&](int i, int j) { return static_cast<NodeId>(j * x + i); };
  for (int j = 0; j < y; ++j)
    for (int i = 0; i < x; ++i)
      add_gpu(topo, "gpu" + std::to_string(i) + "_" + std::to_string(j), j * x + i, 0, j * x + i);
  // One duplex link to the next neighbour along each dimension; a dimension of 2 has a single
  // link between its two members, a dimension of 1 none.
  for (int j = 0; j < y; ++j)
    for (int i = 0; i < x; ++i) {
      if (x > 2 || (x == 2 && i == 0)) topo.add_duplex(id(i, j), id((i + 1) % x, j), kGenericLink);
      if (y > 2 || (y == 2 && j == 0)) topo.add_duplex(id(i, j), id(i, (j + 1) % y), kGenericLink);
    }
  return topo;
}

Topology make_fullmesh(int ranks) {
  Topology topo("fullmesh" + std::to_string(ranks));
  for (int r = 0; r < ranks; ++r) add_gpu(topo, "gpu" + std::to_string(r), r, 0, r);
  for (int a = 0; a < ranks; ++a)
    for (int b = a + 1; b < ranks; ++b)
      topo.add_duplex(static_cast<NodeId>(a), static_cast<NodeId>(b), kGenericLink);
  return topo;
}

Topology make_fattree(int ranks) {
  Topology topo("fattree" + std::to_string(ranks));
  // p hosts per leaf and p spines, one uplink per (leaf, spine): full bisection bandwidth.
  const int per_leaf = static_cast<int>(std::ceil(std::sqrt(static_cast<double>(ranks))));
  const int leaves = (ranks + per_leaf - 1) / per_leaf;
  std::vector<NodeId> gpus;
  for (int r = 0; r < ranks; ++r) gpus.push_back(add_gpu(topo, "gpu" + std::to_string(r), r, r, 0));
  std::vector<NodeId> leaf_ids;
  for (int l = 0; l < leaves; ++l)
    leaf_ids.push_back(add_plain(topo, "leaf" + std::to_string(l), NodeKind::switch_));
  for (int r = 0; r < ranks; ++r)
    topo.add_duplex(gpus[static_cast<std::size_t>(r)],
                    leaf_ids[static_cast<std::size_t>(r / per_leaf)], kFatTreeHostLink);
  if (leaves > 1) {
    for (int s = 0; s < per_leaf; ++s) {
      const NodeId spine = add_plain(topo, "spine" + std::to_string(s), NodeKind::switch_);
      for (NodeId leaf : leaf_ids) topo.add_duplex(leaf, spine, kFatTreeUplink);
    }
  }
  return topo;
}

std::vector<BuiltinFamily> builtin_families() {
  return {
      {"a100x<K>", "a100x4",
       "K DGX-A100 nodes: 8 GPUs on NVSwitch (240 GB/s), one 25 GB/s HDR NIC per GPU, "
       "rail-optimised leaves"},
      {"a100x4-degraded", "a100x4-degraded",
       "a100x4 with NIC 3 of host 1 at a quarter of its bandwidth (6.25 GB/s)"},
      {"h100x<K>", "h100x4",
       "K DGX-H100 nodes: 8 GPUs on NVSwitch (370.8 GB/s), one 50 GB/s NDR NIC per GPU, "
       "rail-optimised leaves"},
      {"dgx1", "dgx1", "8 V100 in the DGX-1 hybrid cube-mesh (NVLink2, 20 GB/s per link)"},
      {"ndv2x<K>", "ndv2x2",
       "K Azure NDv2 nodes: DGX-1 cube-mesh, PCIe 3.0 to one 12.5 GB/s EDR NIC per node"},
      {"ring<N>", "ring8", "N GPUs on a bidirectional ring, 25 GB/s and 1 us per link"},
      {"torus<X>x<Y>", "torus4x4", "2D torus of X*Y GPUs, 25 GB/s and 1 us per link"},
      {"fullmesh<N>", "fullmesh8", "N GPUs, a 25 GB/s, 1 us link between every pair"},
      {"fattree<N>", "fattree16",
       "N single-GPU hosts, 25 GB/s to a leaf, full-bisection two-level fat tree"},
  };
}

std::optional<Topology> make_builtin_topology(std::string_view name) {
  auto in_range = [&](int value, int lo, int hi, const std::string& what) {
    require(value >= lo && value <= hi, name,
            what + " must be between " + std::to_string(lo) + " and " + std::to_string(hi));
    return value;
  };
  if (name == "dgx1") return make_dgx1();
  if (name == "a100x4-degraded") return make_a100x4_degraded();
  if (auto k = number_after(name, "a100x"))
    return make_a100(in_range(*k, 1, kMaxRanks / kGpusPerDgx, "the number of nodes"));
  if (auto k = number_after(name, "h100x"))
    return make_h100(in_range(*k, 1, kMaxRanks / kGpusPerDgx, "the number of nodes"));
  if (auto k = number_after(name, "ndv2x"))
    return make_ndv2(in_range(*k, 1, kMaxRanks / kGpusPerDgx, "the number of nodes"));
  if (auto n = number_after(name, "ring"))
    return make_ring(in_range(*n, 2, kMaxRanks, "the number of ranks"));
  if (auto n = number_after(name, "fullmesh"))
    return make_fullmesh(in_range(*n, 2, 1024, "the number of ranks"));
  if (auto n = number_after(name, "fattree"))
    return make_fattree(in_range(*n, 2, kMaxRanks, "the number of ranks"));
  if (name.starts_with("torus")) {
    const auto cross = name.find('x', 5);
    if (cross != std::string_view::npos) {
      auto x = number_after(name.substr(0, cross), "torus");
      auto y = number_after(name.substr(cross), "x");
      if (x && y) {
        in_range(*x, 1, kMaxRanks, "X");
        in_range(*y, 1, kMaxRanks, "Y");
        require(*x * *y >= 2 && *x * *y <= kMaxRanks, name, "X*Y must be between 2 and 65536");
        return make_torus(*x, *y);
      }
    }
  }
  return std::nullopt;
}

}  // namespace optiflow::topology
