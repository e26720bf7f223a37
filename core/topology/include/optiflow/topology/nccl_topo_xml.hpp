// Importing NCCL topology XML (what NCCL_TOPO_DUMP_FILE writes and NCCL_TOPO_FILE reads) as a
// Topology. The figures the XML does not carry, and how they are chosen, are in
// docs/nccl-topo-import.md and in the table at the top of nccl_topo_xml.cpp.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "optiflow/topology/topology.hpp"

namespace optiflow::topology {

/// What the XML cannot say: how many hosts, and the speeds it leaves out.
struct NcclImportOptions {
  /// Replicate the described host this many times (>= 1), all NICs joined by one switch "net".
  int hosts = 1;
  /// NIC speed in GB/s per direction for every NIC, also those with a `<net speed>`. Absent =
  /// each NIC's `<net speed>`, else the default of the GPUs' generation (`<gpu sm>`: 7x 12.5 EDR,
  /// 8x 25 HDR, 9x 50 NDR; unknown 25). A note says which source was used.
  std::optional<double> nic_GBps;
  /// When the XML has no `<nvlink>`: give each host an NVSwitch with one link of this many GB/s
  /// per direction per GPU (e.g. 240 for NDv4, 370.8 for NDv5: NCCL's per-link NVLink figure x
  /// the links per GPU). Absent = GPUs talk over PCIe only.
  std::optional<double> nvswitch_GBps;
  /// Topology name; empty = the stem of `source`.
  std::string name;
};

/// The topology, and the assumptions applied to build it, one line each (for "note: ..."),
/// in a deterministic order.
struct NcclImportResult {
  Topology topology;
  std::vector<std::string> notes;
};

/// Builds a topology from the text of an NCCL topology XML file. `source` names the input in
/// errors and gives the default name. Node ids are `h<h>.cpu<numaid>`, `h<h>.pcisw<k>`,
/// `h<h>.gpu<local>`, `h<h>.nic<k>`, `h<h>.nvswitch` and `net`; GPU ranks are
/// host * gpus_per_host + local. The result has passed Topology::validate(). Throws InputError
/// located at the XML line, with the element and attribute as field (e.g.
/// `<pci busid="0001:00:00.0">.link_width`).
NcclImportResult import_nccl_topology_xml(std::string_view xml_text, const std::string& source,
                                          const NcclImportOptions& options = {});

/// Reads and imports an NCCL topology XML file; errors name the file.
NcclImportResult read_nccl_topology_file(const std::string& path,
                                         const NcclImportOptions& options = {});

}  // namespace optiflow::topology
