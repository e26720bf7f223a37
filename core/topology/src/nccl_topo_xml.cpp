#include "optiflow/topology/nccl_topo_xml.hpp"

#include <tinyxml2.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <map>
#include <sstream>

#include "optiflow/support/error.hpp"
#include "optiflow/support/parse_support.hpp"
#include "optiflow/support/text_file.hpp"
#include "optiflow/support/xml_attributes.hpp"

namespace optiflow::topology {
namespace {

using tinyxml2::XMLElement;

// The figures an NCCL topology file does not carry, in one place. Bandwidths are per direction;
// docs/nccl-topo-import.md compares them with NCCL's. NCCL sources: src/graph/topo.cc, topo.h,
// xml.cc (NCCL 2.21.5 to 2.28.9).
//  - PCIe, line rate: GT/s x lanes x encoding / 8. Encoding 8b/10b to Gen2, 128b/130b Gen3-5,
//    FLIT 242/256 Gen6 (PCIe base specs): Gen4 x16 = 31.5 GB/s. NCCL (kvDictPciGen, width *
//    speed / 80) counts 75% of the raw rate: Gen4 x16 = 24 GB/s.
//  - Empty link_speed or link_width 0 (VMs, e.g. NCv4): the parent <pci>'s figures, else Gen4
//    x16. (NCCL takes width 16 and, for an unknown speed, Gen3.)
//  - NVLink per link per direction by <gpu sm>, achievable: NCCL's SM60/70/80/86/90/100_NVLINK_BW
//    (topo.h) = 18, 20, 20, 12, 20.6, 40.1 GB/s, chosen as ncclTopoNVLinkBw does (sm >= 100,
//    >= 90, == 86, >= 80, >= 70, >= 60, else the sm80 figure). SM100_NVLINK_BW is 40.1 from
//    NCCL 2.27.5 (40.0 in 2.25 to 2.27.3); the others are unchanged since 2.21.5. The line
//    rates are 25 GB/s per link for NVLink2-4, 50 for NVLink5 (NVIDIA architecture whitepapers).
//  - Between the NUMA nodes of a host: NCCL's constants (topo.h BDW/SKL/SRP/ERP_QPI_BW, AMD_BW,
//    P9_BW, ARM_BW), chosen by arch, vendor and model as ncclTopoGetInterCpuBw does.
//  - NICs: <net speed> is in Mb/s (NCCL fills it from the port's reported speed, the line rate).
//    Without one, the default of the GPUs' generation (<gpu sm>): sm 70-79 EDR 100 Gb/s = 12.5
//    (NDv2), sm 80-89 HDR 200 Gb/s = 25 (NDv4, DGX-A100), sm 90-99 NDR 400 Gb/s = 50 GB/s (NDv5,
//    DGX-H100); no sm, GPUs of different generations, or another sm: 25 (HDR). --nic-GBps
//    (NcclImportOptions::nic_GBps) overrides every NIC, also those with a <net speed>.
//  - Latency per hop: NVLink 0.3 us, NVSwitch 0.35 us (TACCL's NDv2 profile); PCIe 0.5,
//    inter-socket 0.5, InfiniBand 1.0, Ethernet (RoCE) 2.0 us are assumptions of that order.
//    (The built-in topologies have moved to alpha 0, the cost model's protocol table giving the
//    per-hop latency; these are kept for now, see docs/nccl-topo-import.md.)
struct PcieEncoding {
  double min_GTps, efficiency;
};
constexpr PcieEncoding kPcieEncodings[] = {{64.0, 242.0 / 256.0}, {8.0, 128.0 / 130.0}, {0, 0.8}};
constexpr double kDefaultPcieGTps = 16.0;
constexpr int kDefaultPcieLanes = 16;

struct NvlinkGeneration {
  int min_sm, max_sm;
  double link_GBps;
};
constexpr NvlinkGeneration kNvlinkBySm[] = {{100, 100000, 40.1}, {90, 99, 20.6}, {86, 86, 12.0},
                                            {80, 89, 20.0},      {70, 79, 20.0}, {60, 69, 18.0}};
constexpr double kFallbackNvlinkGBps = 20.0;  // NCCL: SM80_NVLINK_BW for anything else

struct SocketLink {
  std::string_view arch, vendor;  // empty vendor: any
  int min_intel_model;            // Intel family 6 model; 0 for everything else
  double bw_GBps;
  std::string_view label;
};
constexpr SocketLink kSocketLinks[] = {
    {"x86_64", "GenuineIntel", 0xCF, 40.0, "Intel Emerald Rapids, NCCL's ERP_QPI_BW"},
    {"x86_64", "GenuineIntel", 0x8F, 22.0, "Intel Sapphire Rapids, NCCL's SRP_QPI_BW"},
    {"x86_64", "GenuineIntel", 0x55, 10.0, "Intel Skylake, NCCL's SKL_QPI_BW"},
    {"x86_64", "GenuineIntel", 0, 6.0, "Intel Broadwell, NCCL's BDW_QPI_BW"},
    {"x86_64", "AuthenticAMD", 0, 16.0, "AMD, NCCL's AMD_BW"},
    {"ppc64", "", 0, 32.0, "POWER9, NCCL's P9_BW"},
    {"arm64", "", 0, 6.0, "Arm, NCCL's ARM_BW"},
    {"", "", 0, 6.0, "unknown CPU: the lowest of NCCL's figures"}};

struct NicGeneration {
  int min_sm, max_sm;
  double nic_GBps;
  std::string_view label;
};
constexpr NicGeneration kNicBySm[] = {
    {70, 79, 12.5, "EDR InfiniBand, 100 Gb/s, as NDv2"},
    {80, 89, 25.0, "HDR InfiniBand, 200 Gb/s, as NDv4 and DGX-A100"},
    {90, 99, 50.0, "NDR InfiniBand, 400 Gb/s, as NDv5 and DGX-H100"}};
constexpr double kUnknownGenerationNicGBps = 25.0;  // HDR InfiniBand, 200 Gb/s
constexpr double kMbpsPerGBps = 8000.0;

constexpr double kNvlinkAlphaUs = 0.3;
constexpr double kNvSwitchAlphaUs = 0.35;
constexpr double kPcieAlphaUs = 0.5;
constexpr double kSocketAlphaUs = 0.5;
constexpr double kIbAlphaUs = 1.0;
constexpr double kEthernetAlphaUs = 2.0;

// PCI class prefixes as NCCL's kvDictPciClass; other classes are bridges if they have <pci> below.
constexpr std::string_view kGpuClass = "0x03";
constexpr std::string_view kNicClass = "0x02";
constexpr std::string_view kEthernetClass = "0x0200";
constexpr std::string_view kBridgeClass = "0x0604";
constexpr std::string_view kCpuClass = "0x068001";  // an NVLink to the CPU (POWER9)

std::string fmt(double value) {
  std::ostringstream out;
  out << value;
  return out.str();
}

using support::trim;

// "1 NIC", "2 NICs".
std::string nics(std::size_t count) {
  return std::to_string(count) + (count == 1 ? " NIC" : " NICs");
}

// "0001:00:00.0" -> 0x10000000 as NCCL's busIdToInt64, so "00000001:00:00.0" is the same device.
std::optional<std::uint64_t> parse_busid(std::string_view s) {
  std::string digits;
  for (char c : s)
    if (c != ':' && c != '.') digits += c;
  std::uint64_t value = 0;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value, 16);
  if (digits.empty() || ec != std::errc{} || end != digits.data() + digits.size())
    return std::nullopt;
  return value;
}

std::vector<const XMLElement*> children(const XMLElement& parent, const char* name) {
  std::vector<const XMLElement*> out;
  for (const XMLElement* e = parent.FirstChildElement(name); e; e = e->NextSiblingElement(name))
    out.push_back(e);
  return out;
}

constexpr support::XmlAttributes::Key kElementKeys[] = {
    {"pci", "busid"}, {"cpu", "numaid"}, {"nvlink", "target"}, {"net", "name"}, {"gpu", "dev"}};

// Integers as NCCL reads them (strtol(..., 0)); attributes are optional unless read with
// required() or busid().
class XmlReader : public support::XmlAttributes {
 public:
  explicit XmlReader(const std::string& source)
      : XmlAttributes(source, kElementKeys, support::IntegerSyntax::c_style) {}

  std::optional<int> integer(const XMLElement& e, const char* attribute, int min, int max) const {
    const auto value = optional_integer(e, attribute, min, max);
    return value ? std::optional<int>(static_cast<int>(*value)) : std::nullopt;
  }
  std::uint64_t busid(const XMLElement& e, const char* attribute) const {
    const std::string_view value = required(e, attribute);
    const auto parsed = parse_busid(value);
    if (!parsed)
      fail(e, attribute, "'" + std::string(value) + "' is not a PCI bus id (dddd:bb:dd.f)");
    return *parsed;
  }
};

// The upstream link of one <pci>.
struct PcieLane {
  double GTps = kDefaultPcieGTps;
  int lanes = kDefaultPcieLanes;
};

LinkSpec pcie_spec(const PcieLane& lane) {
  const auto encoding =
      std::find_if(std::begin(kPcieEncodings), std::end(kPcieEncodings),
                   [&](const PcieEncoding& e) { return lane.GTps >= e.min_GTps; });
  return LinkSpec{LinkKind::pcie, lane.GTps * lane.lanes * encoding->efficiency / 8.0,
                  kPcieAlphaUs};
}

double nvlink_GBps(std::optional<int> sm) {
  for (const NvlinkGeneration& generation : kNvlinkBySm)
    if (sm && *sm >= generation.min_sm && *sm <= generation.max_sm) return generation.link_GBps;
  return kFallbackNvlinkGBps;
}

// One host as the file describes it, before replication; ids lack the "h<h>." prefix.
struct HostNode {
  std::string id;
  NodeKind kind;
  int local = -1;
};
struct HostLink {
  std::size_t a, b;
  LinkSpec spec;
  bool duplex;
  int nvlinks = 0;  // NVLink and NVSwitch links: how many NVLinks make up `spec`
};
struct HostModel {
  std::vector<HostNode> nodes;
  std::vector<HostLink> links;
  std::vector<std::pair<std::size_t, LinkSpec>> uplinks;  // NIC -> "net"
  int gpu_count = 0;
  int gpu_sm = 0;  // the GPUs' <gpu sm> when they all give the same one, else 0
};

struct GpuInfo {
  std::size_t node, cpu_node;
  std::uint64_t busid;
  const XMLElement* gpu;  // the <gpu> child; null in class-only files
  std::optional<int> rank, sm;
};

// Walks one <system> into a HostModel and says which assumptions it applied.
class HostBuilder {
 public:
  HostBuilder(const XmlReader& xml, const NcclImportOptions& options)
      : xml_(xml), options_(options) {}

  HostModel build(const XMLElement& system) {
    for (const XMLElement* cpu : children(system, "cpu")) add_cpu(*cpu);
    if (gpus_.empty()) xml_.fail(system, "", "no GPU: no <pci> of class 0x03xxxx under a <cpu>");
    if (pcie_defaults_ > 0)
      notes_.push_back(std::to_string(pcie_defaults_) + " PCIe links without link_speed or " +
                       "link_width taken as Gen4 x16 (" + fmt(pcie_spec({}).bw_GBps) + " GB/s)");
    if (ignored_devices_ > 0)
      notes_.push_back("ignored " + std::to_string(ignored_devices_) +
                       " PCI devices that are neither GPU, NIC nor bridge");
    connect_cpus();
    name_gpus();
    add_nvlinks();
    name_nics();
    host_.gpu_sm = common_sm();
    return std::move(host_);
  }
  std::vector<std::string> take_notes() { return std::move(notes_); }

 private:
  std::size_t add_node(std::string id, NodeKind kind) {
    host_.nodes.push_back(HostNode{std::move(id), kind, -1});
    return host_.nodes.size() - 1;
  }
  void add_link(std::size_t a, std::size_t b, const LinkSpec& spec, bool duplex = true) {
    host_.links.push_back(HostLink{a, b, spec, duplex});
  }
  // `count` NVLinks of `link_GBps` each. An <nvlink> listed twice, or NVLinks to several
  // NVSwitch chips, add up as in NCCL (counted, so 9 + 9 links are exactly 18 x the figure).
  void add_nvlink(std::size_t a, std::size_t b, LinkSpec spec, int count, bool duplex) {
    const double link_GBps = spec.bw_GBps;
    for (HostLink& link : host_.links) {
      if (link.a == a && link.b == b && link.duplex == duplex && link.spec.kind == spec.kind) {
        link.nvlinks += count;
        link.spec.bw_GBps = link.nvlinks * link_GBps;
        return;
      }
    }
    spec.bw_GBps = count * link_GBps;
    host_.links.push_back(HostLink{a, b, spec, duplex, count});
  }

  void add_cpu(const XMLElement& cpu) {
    const auto numaid = xml_.integer(cpu, "numaid", 0, 1 << 20);
    if (!numaid) xml_.fail(cpu, "numaid", "missing (required attribute)");
    const std::string id = "cpu" + std::to_string(*numaid);
    for (const auto& [node, socket] : cpus_)
      if (host_.nodes[node].id == id) xml_.fail(cpu, "numaid", "another <cpu> has this numaid");
    cpu_node_ = add_node(id, NodeKind::cpu);
    cpus_.emplace_back(cpu_node_, &socket_link(cpu));
    for (const XMLElement* child = cpu.FirstChildElement(); child;
         child = child->NextSiblingElement()) {
      if (std::string_view(child->Name()) == "pci") add_pci(*child, cpu_node_, std::nullopt);
      if (std::string_view(child->Name()) == "nic") {
        ++pcie_defaults_;  // a <nic> right under <cpu> has no PCIe figures at all
        add_nic(*child, std::nullopt, cpu_node_, pcie_spec({}), "");
      }
    }
  }

  const SocketLink& socket_link(const XMLElement& cpu) const {
    const std::string_view arch = xml_.text(cpu, "arch").value_or("");
    const std::string_view vendor = xml_.text(cpu, "vendor").value_or("");
    const int family = xml_.integer(cpu, "familyid", 0, 1 << 20).value_or(0);
    const int model = family == 6 ? xml_.integer(cpu, "modelid", 0, 1 << 20).value_or(0) : 0;
    for (const SocketLink& link : kSocketLinks)
      if ((link.arch == arch && (link.vendor.empty() || link.vendor == vendor) &&
           model >= link.min_intel_model) ||
          link.arch.empty())
        return link;
    return kSocketLinks[std::size(kSocketLinks) - 1];
  }

  PcieLane pcie_lane(const XMLElement& pci, const std::optional<PcieLane>& parent) {
    PcieLane lane = parent.value_or(PcieLane{});
    const int width = xml_.integer(pci, "link_width", 0, 32).value_or(0);
    const std::string_view speed = xml_.text(pci, "link_speed").value_or("Unknown");
    if (width > 0) lane.lanes = width;
    if (!speed.starts_with("Unknown")) {  // sysfs writes "Unknown" when it cannot tell
      double GTps = 0;
      auto [end, ec] = std::from_chars(speed.data(), speed.data() + speed.size(), GTps);
      const std::string_view unit =
          trim(speed.substr(static_cast<std::size_t>(end - speed.data())));
      if (ec != std::errc{} || !(GTps > 0) || !std::isfinite(GTps) ||
          (unit != "GT/s" && unit != "GT/s PCIe"))
        xml_.fail(pci, "link_speed",
                  "'" + std::string(speed) +
                      "' is not a PCIe speed like \"16 GT/s\" or "
                      "\"32.0 GT/s PCIe\"");
      lane.GTps = GTps;
    }
    if ((width == 0 || speed.starts_with("Unknown")) && !parent) ++pcie_defaults_;
    return lane;
  }

  void add_pci(const XMLElement& pci, std::size_t parent, const std::optional<PcieLane>& up) {
    const std::uint64_t busid = xml_.busid(pci, "busid");
    if (auto [it, fresh] = busid_lines_.emplace(busid, pci.GetLineNum()); !fresh)
      xml_.fail(pci, "busid", "duplicate bus id (also at line " + std::to_string(it->second) + ")");
    const std::string_view cls = xml_.required(pci, "class");
    const PcieLane lane = pcie_lane(pci, up);
    const XMLElement* nic = pci.FirstChildElement("nic");
    if (cls.starts_with(kGpuClass)) {
      add_gpu(pci, busid, parent, pcie_spec(lane));
    } else if (cls.starts_with(kNicClass) || nic) {
      add_nic(nic ? *nic : pci, busid, parent, pcie_spec(lane), cls);
    } else if (cls.starts_with(kBridgeClass) || pci.FirstChildElement("pci")) {
      const std::size_t node = add_node("pcisw" + std::to_string(switches_++), NodeKind::switch_);
      add_link(parent, node, pcie_spec(lane));
      for (const XMLElement* child : children(pci, "pci")) add_pci(*child, node, lane);
    } else {
      ++ignored_devices_;
    }
  }

  void add_gpu(const XMLElement& pci, std::uint64_t busid, std::size_t parent,
               const LinkSpec& spec) {
    const std::size_t node = add_node({}, NodeKind::gpu);  // named once all GPUs are known
    add_link(parent, node, spec);
    GpuInfo gpu{node, cpu_node_, busid, pci.FirstChildElement("gpu"), std::nullopt, std::nullopt};
    if (gpu.gpu) {
      gpu.rank = xml_.integer(*gpu.gpu, "rank", 0, 1 << 24);
      gpu.sm = xml_.integer(*gpu.gpu, "sm", 0, 10000);
      for (const XMLElement* nvlink : children(*gpu.gpu, "nvlink"))
        nvlinks_.emplace_back(gpus_.size(), nvlink);
    }
    gpus_.push_back(gpu);
  }

  // `nic` holds the <net> ports (none in class-only files), whose speeds add up: a multi-port
  // NIC is one node. `busid` is absent for a <nic> right under <cpu>.
  void add_nic(const XMLElement& nic, std::optional<std::uint64_t> busid, std::size_t parent,
               const LinkSpec& spec, std::string_view cls) {
    double speed_GBps = 0;
    bool ethernet = cls.starts_with(kEthernetClass);
    for (const XMLElement* net : children(nic, "net")) {
      speed_GBps += xml_.integer(*net, "speed", 0, 1 << 30).value_or(0) / kMbpsPerGBps;
      ethernet = ethernet || xml_.text(*net, "name").value_or("").starts_with("eth");
    }
    const std::size_t node = add_node({}, NodeKind::nic);  // named once all NICs are known
    nics_.emplace_back(busid.value_or(UINT64_MAX), node);
    add_link(parent, node, spec);
    // The speed is settled in set_nic_speeds(), once the GPUs' generation is known; 0 = none.
    host_.uplinks.emplace_back(node, ethernet ? LinkSpec{LinkKind::ethernet, 0, kEthernetAlphaUs}
                                              : LinkSpec{LinkKind::ib, 0, kIbAlphaUs});
    nic_file_GBps_.push_back(speed_GBps);
  }

  // The default speed of NICs without <net speed>, from the GPUs' generation (<gpu sm>; every
  // GPU with an sm must be of one kNicBySm row), and the note's words for where it comes from.
  int common_sm() const {
    std::optional<int> sm;
    for (const GpuInfo& gpu : gpus_) {
      if (!gpu.sm || (sm && *sm != *gpu.sm)) return 0;
      sm = gpu.sm;
    }
    return sm.value_or(0);
  }

  std::pair<double, std::string> generation_nic_default() const {
    std::optional<int> sm;
    bool mixed = false;
    for (const GpuInfo& gpu : gpus_) {
      if (!gpu.sm) continue;
      if (!sm) sm = gpu.sm;
      mixed = mixed || *sm / 10 != *gpu.sm / 10;
    }
    const auto unknown = [](const std::string& why) {
      return std::pair{kUnknownGenerationNicGBps,
                       fmt(kUnknownGenerationNicGBps) + " GB/s (HDR InfiniBand, 200 Gb/s): the " +
                           "GPU generation is unknown, " + why + "; see --nic-GBps"};
    };
    if (!sm) return unknown("no <gpu sm> in the file");
    if (mixed) return unknown("the GPUs' sm are of different generations");
    for (const NicGeneration& generation : kNicBySm)
      if (*sm >= generation.min_sm && *sm <= generation.max_sm)
        return {generation.nic_GBps, fmt(generation.nic_GBps) + " GB/s, the GPU-generation " +
                                         "default for sm" + std::to_string(*sm) + " (" +
                                         std::string(generation.label) + "; see --nic-GBps)"};
    return unknown("no NIC default for sm" + std::to_string(*sm));
  }

  // Each NIC's speed: --nic-GBps for all, else its <net speed>, else the generation's default;
  // the notes say which source each NIC took.
  void set_nic_speeds() {
    std::vector<double> file_speeds;  // distinct, ascending
    std::size_t from_file = 0;
    for (double speed : nic_file_GBps_) {
      if (!(speed > 0)) continue;
      ++from_file;
      if (std::find(file_speeds.begin(), file_speeds.end(), speed) == file_speeds.end())
        file_speeds.push_back(speed);
    }
    std::sort(file_speeds.begin(), file_speeds.end());
    const std::size_t without = nic_file_GBps_.size() - from_file;
    if (options_.nic_GBps) {
      for (auto& uplink : host_.uplinks) uplink.second.bw_GBps = *options_.nic_GBps;
      if (!nic_file_GBps_.empty())
        notes_.push_back(nics(nic_file_GBps_.size()) + " taken as " + fmt(*options_.nic_GBps) +
                         " GB/s (--nic-GBps, for every NIC" +
                         (from_file > 0 ? "; it overrides the <net speed> of " + nics(from_file)
                                        : std::string()) +
                         ")");
      return;
    }
    const auto [default_GBps, default_source] = generation_nic_default();
    for (std::size_t k = 0; k < host_.uplinks.size(); ++k)
      host_.uplinks[k].second.bw_GBps = nic_file_GBps_[k] > 0 ? nic_file_GBps_[k] : default_GBps;
    if (from_file > 0) {
      std::string speeds;
      for (double speed : file_speeds) speeds += (speeds.empty() ? "" : ", ") + fmt(speed);
      notes_.push_back(nics(from_file) + " at the file's <net speed> (" + speeds + " GB/s)");
    }
    if (without > 0)
      notes_.push_back(nics(without) + " without <net speed> taken as " + default_source);
  }

  void connect_cpus() {
    for (std::size_t i = 0; i < cpus_.size(); ++i)
      for (std::size_t j = i + 1; j < cpus_.size(); ++j)
        add_link(cpus_[i].first, cpus_[j].first,
                 {LinkKind::cpu, std::min(cpus_[i].second->bw_GBps, cpus_[j].second->bw_GBps),
                  kSocketAlphaUs});
    if (cpus_.size() > 1)
      notes_.push_back("NUMA nodes joined pairwise at " + fmt(cpus_[0].second->bw_GBps) +
                       " GB/s per direction (" + std::string(cpus_[0].second->label) + ")");
  }

  // Ranks from <gpu rank> when every GPU has one, else bus-id order (CUDA_DEVICE_ORDER=PCI_BUS_ID).
  void name_gpus() {
    const bool ranked = std::all_of(gpus_.begin(), gpus_.end(),
                                    [](const GpuInfo& gpu) { return gpu.rank.has_value(); });
    std::vector<const GpuInfo*> order;
    for (const GpuInfo& gpu : gpus_) order.push_back(&gpu);
    std::stable_sort(order.begin(), order.end(), [&](const GpuInfo* a, const GpuInfo* b) {
      return ranked ? *a->rank < *b->rank : a->busid < b->busid;
    });
    for (std::size_t local = 0; local < order.size(); ++local) {
      if (ranked && local > 0 && *order[local]->rank == *order[local - 1]->rank)
        xml_.fail(*order[local]->gpu, "rank", "another <gpu> has this rank");
      host_.nodes[order[local]->node].id = "gpu" + std::to_string(local);
      host_.nodes[order[local]->node].local = static_cast<int>(local);
    }
    host_.gpu_count = static_cast<int>(gpus_.size());
    if (!ranked)
      notes_.push_back(
          "GPU ranks follow PCI bus-id order (CUDA_DEVICE_ORDER=PCI_BUS_ID): not "
          "every GPU has a <gpu rank>");
  }

  // In bus-id order like the GPUs, so that on rail-optimized hosts nic<i> sits by gpu<i>.
  void name_nics() {
    std::stable_sort(nics_.begin(), nics_.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    for (std::size_t k = 0; k < nics_.size(); ++k)
      host_.nodes[nics_[k].second].id = "nic" + std::to_string(k);
    set_nic_speeds();
  }

  std::size_t nvswitch() {
    if (!nvswitch_) nvswitch_ = add_node("nvswitch", NodeKind::switch_);
    return *nvswitch_;
  }

  std::size_t gpu_of_busid(std::optional<std::uint64_t> busid) const {
    for (std::size_t i = 0; i < gpus_.size(); ++i)
      if (busid && gpus_[i].busid == *busid) return i;
    return gpus_.size();
  }

  void add_nvlinks() {
    if (nvlinks_.empty()) return add_nvswitch_option();
    if (options_.nvswitch_GBps) notes_.push_back("--nvswitch-GBps ignored: the file has NVLinks");
    bool guessed_sm = false;
    int hidden_peers = 0;
    for (const auto& [index, nvlink] : nvlinks_) {
      const GpuInfo& gpu = gpus_[index];
      guessed_sm = guessed_sm || !gpu.sm;
      const auto count = xml_.integer(*nvlink, "count", 1, 1 << 10);
      if (!count) xml_.fail(*nvlink, "count", "missing (required attribute)");
      const double link_GBps = nvlink_GBps(gpu.sm);
      const auto target = xml_.text(*nvlink, "target");
      const std::string_view tclass = xml_.text(*nvlink, "tclass").value_or("");
      const bool to_gpu = tclass.empty()
                              ? target && gpu_of_busid(parse_busid(*target)) < gpus_.size()
                              : tclass.starts_with(kGpuClass);
      if (to_gpu) {
        const std::size_t peer = gpu_of_busid(xml_.busid(*nvlink, "target"));
        if (peer == gpus_.size()) {  // a GPU outside the job; NCCL skips these too
          ++hidden_peers;
          continue;
        }
        if (peer == index) xml_.fail(*nvlink, "target", "an NVLink from a GPU to itself");
        // Each GPU lists its own side: one direction per element.
        add_nvlink(gpu.node, gpus_[peer].node, {LinkKind::nvlink, link_GBps, kNvlinkAlphaUs},
                   *count, false);
      } else if (tclass == kCpuClass) {
        add_nvlink(gpu.node, gpu.cpu_node, {LinkKind::nvlink, link_GBps, kNvlinkAlphaUs}, *count,
                   true);
      } else {  // NCCL takes every other target class for an NVSwitch, and all chips as one
        add_nvlink(gpu.node, nvswitch(), {LinkKind::nvswitch, link_GBps, kNvSwitchAlphaUs}, *count,
                   true);
      }
    }
    if (hidden_peers > 0)
      notes_.push_back("skipped " + std::to_string(hidden_peers) +
                       " <nvlink> to GPUs that are not in the file");
    if (guessed_sm)
      notes_.push_back("a <gpu> without sm: its NVLinks count " + fmt(kFallbackNvlinkGBps) +
                       " GB/s per link (NCCL's SM80_NVLINK_BW, as ncclTopoNVLinkBw)");
  }

  void add_nvswitch_option() {
    if (!options_.nvswitch_GBps) {
      notes_.push_back(
          "the file has no <nvlink>: GPUs communicate over PCIe only (VM images "
          "omit NVLinks; --nvswitch-GBps adds an NVSwitch, e.g. 240 for A100 or 370.8 for "
          "H100, NCCL's per-link figure x the links per GPU)");
      return;
    }
    for (const GpuInfo& gpu : gpus_)
      add_link(gpu.node, nvswitch(),
               {LinkKind::nvswitch, *options_.nvswitch_GBps, kNvSwitchAlphaUs});
    notes_.push_back("the file has no <nvlink>: added an NVSwitch at " +
                     fmt(*options_.nvswitch_GBps) + " GB/s per GPU per direction");
  }

  const XmlReader& xml_;
  const NcclImportOptions& options_;
  HostModel host_;
  std::vector<std::string> notes_;
  std::vector<std::pair<std::size_t, const SocketLink*>> cpus_;     // node, figures
  std::vector<GpuInfo> gpus_;                                       // in document order
  std::vector<std::pair<std::size_t, const XMLElement*>> nvlinks_;  // gpus_ index, <nvlink>
  std::vector<std::pair<std::uint64_t, std::size_t>> nics_;         // bus id (or max), node
  std::vector<double> nic_file_GBps_;  // per host_.uplinks entry: <net speed>, 0 if none
  std::map<std::uint64_t, int> busid_lines_;
  std::optional<std::size_t> nvswitch_;
  std::size_t cpu_node_ = 0;
  int switches_ = 0, pcie_defaults_ = 0, ignored_devices_ = 0;
};

// Copies the host `hosts` times with "h<h>." prefixes, and joins every NIC to one switch "net".
Topology replicate(const HostModel& host, int hosts, std::string name) {
  Topology topo(std::move(name));
  topo.set_gpu_sm(host.gpu_sm);
  const auto per_host = static_cast<NodeId>(host.nodes.size());
  for (int h = 0; h < hosts; ++h) {
    const std::string prefix = "h" + std::to_string(h) + ".";
    for (const HostNode& n : host.nodes) {
      const int rank = n.kind == NodeKind::gpu ? h * host.gpu_count + n.local : -1;
      topo.add_node(Node{prefix + n.id, n.kind, rank, h, n.local});
    }
    const NodeId base = per_host * static_cast<NodeId>(h);
    for (const HostLink& l : host.links) {
      const NodeId a = base + static_cast<NodeId>(l.a);
      const NodeId b = base + static_cast<NodeId>(l.b);
      if (l.duplex) {
        topo.add_duplex(a, b, l.spec);
      } else {
        topo.add_link(a, b, l.spec);
      }
    }
  }
  if (host.uplinks.empty()) return topo;
  const NodeId net = topo.add_node(Node{"net", NodeKind::switch_, -1, -1, -1});
  for (int h = 0; h < hosts; ++h)
    for (const auto& [nic, spec] : host.uplinks)
      topo.add_duplex(per_host * static_cast<NodeId>(h) + static_cast<NodeId>(nic), net, spec);
  return topo;
}

void check_options(const NcclImportOptions& options, const std::string& source) {
  auto fail = [&](const char* field, const std::string& message) {
    throw support::InputError(support::SourceLocation{source, 0, 0, field}, message);
  };
  auto positive = [](std::optional<double> v) { return !v || (*v > 0 && std::isfinite(*v)); };
  if (options.hosts < 1 || options.hosts > 4096) fail("hosts", "must be in [1, 4096]");
  if (!positive(options.nic_GBps)) fail("nic_GBps", "must be a positive number of GB/s");
  if (!positive(options.nvswitch_GBps)) fail("nvswitch_GBps", "must be a positive number of GB/s");
}

}  // namespace

NcclImportResult import_nccl_topology_xml(std::string_view xml_text, const std::string& source,
                                          const NcclImportOptions& options) {
  check_options(options, source);
  tinyxml2::XMLDocument doc;
  if (doc.Parse(xml_text.data(), xml_text.size()) != tinyxml2::XML_SUCCESS)
    throw support::InputError(support::SourceLocation{source, doc.ErrorLineNum(), 0, {}},
                              support::xml_error_message(doc));
  if (!doc.RootElement())
    throw support::InputError(support::SourceLocation{source, 0, 0, {}},
                              "malformed XML: no root element");
  const XMLElement& root = *doc.RootElement();
  const XmlReader xml(source);
  if (std::string_view(root.Name()) == "graphs")
    xml.fail(root, "",
             "this is an NCCL graph file (NCCL_GRAPH_FILE / NCCL_GRAPH_DUMP_FILE: rings and "
             "trees), not a topology file; import the <system> file from NCCL_TOPO_DUMP_FILE");
  if (std::string_view(root.Name()) != "system")
    xml.fail(root, "", "the root element must be <system> (an NCCL topology file)");

  HostBuilder builder(xml, options);
  const HostModel host = builder.build(root);
  std::string name =
      options.name.empty() ? std::filesystem::path(source).stem().string() : options.name;
  NcclImportResult result{replicate(host, options.hosts, std::move(name)), builder.take_notes()};
  if (options.hosts > 1)
    result.notes.push_back("the host is replicated " + std::to_string(options.hosts) +
                           " times; all NICs meet on one non-blocking switch \"net\"");
  result.topology.validate(source);
  return result;
}

NcclImportResult read_nccl_topology_file(const std::string& path,
                                         const NcclImportOptions& options) {
  return import_nccl_topology_xml(support::read_text_file(path), path, options);
}

}  // namespace optiflow::topology
