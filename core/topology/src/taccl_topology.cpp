#include "optiflow/topology/taccl_topology.hpp"

#include <cctype>
#include <charconv>
#include <cmath>
#include <nlohmann/json.hpp>

#include "optiflow/support/error.hpp"
#include "optiflow/support/parse_support.hpp"
#include "optiflow/support/text_file.hpp"
#include "optiflow/support/units.hpp"

namespace optiflow::topology {
namespace {

using nlohmann::json;

constexpr int kNdv2Gpus = 8;
constexpr int kNdv2Nics = 1;
constexpr int kDgx2Gpus = 16;
constexpr int kDgx2Nics = 8;
constexpr int kV100Sm = 70;
constexpr std::uint64_t kDefaultReferenceBytes = std::uint64_t{1} << 20;

// NDv2's cube-mesh as TACCL encodes it (generic.py, ndv2()): 1 marks a link; class 1 links
// (node_betas_list[0], the doubled NVLinks) and class 2 links (node_betas_list[1]).
constexpr int kNdv2Class[kNdv2Gpus][kNdv2Gpus] = {
    {0, 1, 2, 2, 1, 0, 0, 0}, {1, 0, 2, 1, 0, 2, 0, 0}, {2, 2, 0, 1, 0, 0, 1, 0},
    {2, 1, 1, 0, 0, 0, 0, 2}, {1, 0, 0, 0, 0, 1, 2, 2}, {0, 2, 0, 0, 1, 0, 2, 1},
    {0, 0, 1, 0, 2, 2, 0, 1}, {0, 0, 0, 2, 2, 1, 1, 0}};

TacclNodeKind node_kind(const support::FieldReader& r, const std::string& name) {
  if (r.has("links")) return TacclNodeKind::custom;
  auto starts = [&](std::string_view prefix) {
    if (name.size() < prefix.size()) return false;
    for (std::size_t i = 0; i < prefix.size(); ++i)
      if (std::tolower(static_cast<unsigned char>(name[i])) != prefix[i]) return false;
    return true;
  };
  if (starts("ndv2")) return TacclNodeKind::ndv2;
  if (starts("dgx2")) return TacclNodeKind::dgx2;
  const json& betas = r.array("node_betas_list");
  if (betas.size() == 2 && r.integer("gpus_per_node", 1, 4096) == kNdv2Gpus)
    return TacclNodeKind::ndv2;
  if (betas.size() == 1) return TacclNodeKind::hub_and_spoke;
  r.fail(r.field("node_betas_list"),
         "cannot tell the node type: a name starting NDv2 or DGX2, one beta (hub-and-spoke), "
         "or a custom \"links\" matrix");
}

// "NDv2_32KB" -> 32 KiB: TACCL names its profiles by the transfer size they were measured at.
std::uint64_t reference_bytes_of(const support::FieldReader& r, const std::string& name) {
  std::size_t end = name.size();
  if (end < 3) return kDefaultReferenceBytes;
  std::string unit = name.substr(end - 2);
  for (char& ch : unit) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  std::uint64_t scale = 0;
  if (unit == "KB") scale = std::uint64_t{1} << 10;
  if (unit == "MB") scale = std::uint64_t{1} << 20;
  if (unit == "GB") scale = std::uint64_t{1} << 30;
  if (scale == 0) return kDefaultReferenceBytes;
  std::size_t begin = end - 2;
  while (begin > 0 && std::isdigit(static_cast<unsigned char>(name[begin - 1]))) --begin;
  if (begin == end - 2) return kDefaultReferenceBytes;
  std::uint64_t count = 0;
  const char* first = name.data() + begin;
  const char* last = name.data() + end - 2;
  if (std::from_chars(first, last, count).ec != std::errc() || count > (std::uint64_t{1} << 20))
    r.fail(r.field("name"), "the transfer size in the name, " + std::string(first, last) + " " +
                                unit + ", is past 1M " + unit);
  return count * scale;
}

double positive_number(const support::FieldReader& r, const json& value, const std::string& at) {
  if (!value.is_number()) r.fail(at, "must be a number");
  const double v = value.get<double>();
  if (!(v > 0) || !std::isfinite(v)) r.fail(at, "must be a positive number");
  return v;
}

std::vector<double> number_list(const support::FieldReader& r, const char* key) {
  const json& list = r.array(key);
  std::vector<double> values;
  for (std::size_t i = 0; i < list.size(); ++i)
    values.push_back(positive_number(r, list[i], r.field(key) + "[" + std::to_string(i) + "]"));
  return values;
}

// TACCL's custom matrices are indexed [dst][src] (topology.py: links[dst][src]).
std::vector<std::vector<double>> square_matrix(const support::FieldReader& r, const char* key,
                                               int n) {
  const json& rows = r.array(key);
  if (static_cast<int>(rows.size()) != n)
    r.fail(r.field(key), "must have gpus_per_node (" + std::to_string(n) + ") rows, not " +
                             std::to_string(rows.size()));
  std::vector<std::vector<double>> by_src_dst(static_cast<std::size_t>(n),
                                              std::vector<double>(static_cast<std::size_t>(n)));
  for (int dst = 0; dst < n; ++dst) {
    const json& row = rows[static_cast<std::size_t>(dst)];
    const std::string at = r.field(key) + "[" + std::to_string(dst) + "]";
    if (!row.is_array() || static_cast<int>(row.size()) != n)
      r.fail(at, "must be an array of " + std::to_string(n) + " numbers");
    for (int src = 0; src < n; ++src) {
      const json& v = row[static_cast<std::size_t>(src)];
      if (!v.is_number() || v.get<double>() < 0)
        r.fail(at + "[" + std::to_string(src) + "]", "must be a non-negative number");
      by_src_dst[static_cast<std::size_t>(src)][static_cast<std::size_t>(dst)] = v.get<double>();
    }
  }
  return by_src_dst;
}

// The NDv2's hybrid cube-mesh: two link classes, each with its beta and inverse bandwidth.
void read_ndv2_links(const support::FieldReader& r, TacclProfile& p) {
  const int n = p.gpus_per_node;
  if (n != kNdv2Gpus)
    r.fail(r.field("gpus_per_node"), "an NDv2 node has 8 GPUs, not " + std::to_string(n));
  const auto betas = number_list(r, "node_betas_list");
  const auto invbws = number_list(r, "node_invbws_list");
  if (betas.size() != 2) r.fail(r.field("node_betas_list"), "NDv2 has two link classes");
  if (invbws.size() != 2) r.fail(r.field("node_invbws_list"), "NDv2 has two link classes");
  for (int a = 0; a < n; ++a)
    for (int b = 0; b < n; ++b)
      if (const int cls = kNdv2Class[a][b]; cls > 0) {
        const auto i = static_cast<std::size_t>(cls - 1);
        p.links[a][b] = 1;
        p.betas[a][b] = betas[i];
        p.invbws[a][b] = std::floor(invbws[i]);
      }
  p.nics_per_node = kNdv2Nics;
}

// A switched node (DGX-2, hub and spoke): every GPU to every other, one beta and invbw.
void read_switched_links(const support::FieldReader& r, TacclProfile& p) {
  const int n = p.gpus_per_node;
  if (p.kind == TacclNodeKind::dgx2 && n != kDgx2Gpus)
    r.fail(r.field("gpus_per_node"), "a DGX-2 node has 16 GPUs, not " + std::to_string(n));
  const auto betas = number_list(r, "node_betas_list");
  const auto invbws = number_list(r, "node_invbws_list");
  if (betas.size() != 1) r.fail(r.field("node_betas_list"), "a switched node has one beta");
  if (invbws.size() != 1) r.fail(r.field("node_invbws_list"), "a switched node has one invbw");
  for (int a = 0; a < n; ++a)
    for (int b = 0; b < n; ++b)
      if (a != b) {
        p.links[a][b] = 1;
        p.betas[a][b] = betas[0];
        p.invbws[a][b] = std::floor(invbws[0]);
      }
  if (p.kind == TacclNodeKind::dgx2) p.nics_per_node = kDgx2Nics;
}

// A custom node: the links, betas and invbws as n x n matrices.
void read_custom_links(const support::FieldReader& r, TacclProfile& p) {
  const int n = p.gpus_per_node;
  const auto links = square_matrix(r, "links", n);
  const auto betas = square_matrix(r, "betas", n);
  const auto invbws = square_matrix(r, "invbws", n);
  for (int a = 0; a < n; ++a)
    for (int b = 0; b < n; ++b) {
      const double count = links[a][b];
      const auto at = [&](const char* field) {
        return r.field(field) + "[" + std::to_string(b) + "][" + std::to_string(a) + "]";
      };
      if (count != std::floor(count)) r.fail(at("links"), "must be a whole number of links");
      if (count > 0 && a == b) r.fail(at("links"), "a GPU has no link to itself");
      if (count > 0 && !(betas[a][b] > 0)) r.fail(at("betas"), "a link needs a positive beta");
      p.links[a][b] = static_cast<int>(count);
      p.betas[a][b] = betas[a][b];
      p.invbws[a][b] = std::floor(invbws[a][b]);
    }
}

TacclProfile read_profile(const support::FieldReader& r, const std::string& source) {
  TacclProfile p;
  p.source = source;
  p.name = r.string("name");
  p.gpus_per_node = static_cast<int>(r.integer("gpus_per_node", 2, 4096));
  p.kind = node_kind(r, p.name);
  p.reference_bytes = reference_bytes_of(r, p.name);
  p.alpha = r.number("alpha");
  if (p.alpha < 0) r.fail(r.field("alpha"), "must not be negative");
  const int n = p.gpus_per_node;
  const auto un = static_cast<std::size_t>(n);
  p.links.assign(un, std::vector<int>(un, 0));
  p.betas.assign(un, std::vector<double>(un, 0.0));
  p.invbws.assign(un, std::vector<double>(un, 0.0));
  // generic.py fixes the NIC count of its known nodes (below), overwriting the file's.
  if (r.has("nics_per_node")) p.nics_per_node = static_cast<int>(r.integer("nics_per_node", 0, n));
  switch (p.kind) {
    case TacclNodeKind::ndv2:
      read_ndv2_links(r, p);
      break;
    case TacclNodeKind::dgx2:
    case TacclNodeKind::hub_and_spoke:
      read_switched_links(r, p);
      break;
    case TacclNodeKind::custom:
      read_custom_links(r, p);
      break;
  }
  if (p.nics_per_node > 0) {
    p.remote_alpha = r.number("remote_alpha");
    p.remote_beta = r.number("remote_beta");
    p.remote_invbw = r.number("remote_invbw");
    if (p.remote_alpha < 0) r.fail(r.field("remote_alpha"), "must not be negative");
    if (!(p.remote_beta > 0)) r.fail(r.field("remote_beta"), "must be positive");
  }
  return p;
}

LinkSpec spec_of(LinkKind kind, std::uint64_t bytes, double beta_us, double alpha_us) {
  return LinkSpec{kind, support::GBps_of(static_cast<double>(bytes), beta_us), alpha_us};
}

// Our topology of `nodes` copies of the profiled node: GPU links from the betas at the reference
// size, each node's NICs shared by consecutive GPUs, the NICs on one InfiniBand switch.
Topology build_topology(const TacclProfile& p, int nodes) {
  Topology topo(nodes > 1 ? p.name + "x" + std::to_string(nodes) : p.name);
  if (p.kind == TacclNodeKind::ndv2 || p.kind == TacclNodeKind::dgx2) topo.set_gpu_sm(kV100Sm);
  const int n = p.gpus_per_node;
  std::vector<NodeId> nics;
  for (int host = 0; host < nodes; ++host) {
    const std::string prefix = "h" + std::to_string(host) + ".";
    std::vector<NodeId> gpus;
    for (int local = 0; local < n; ++local)
      gpus.push_back(topo.add_node(Node{prefix + "gpu" + std::to_string(local), NodeKind::gpu,
                                        host * n + local, host, local}));
    if (p.switched()) {
      const NodeId sw = topo.add_node(Node{prefix + "nvswitch", NodeKind::switch_, -1, host, -1});
      for (int local = 0; local < n; ++local) {
        const double beta = p.betas[static_cast<std::size_t>(local)][(local + 1) % n];
        topo.add_link(gpus[static_cast<std::size_t>(local)], sw,
                      spec_of(LinkKind::nvswitch, p.reference_bytes, beta, p.alpha));
        topo.add_link(sw, gpus[static_cast<std::size_t>(local)],
                      spec_of(LinkKind::nvswitch, p.reference_bytes, beta, 0.0));
      }
    } else {
      for (int a = 0; a < n; ++a)
        for (int b = 0; b < n; ++b)
          if (const int count = p.links[a][b]; count > 0) {
            LinkSpec spec = spec_of(LinkKind::nvlink, p.reference_bytes, p.betas[a][b], p.alpha);
            spec.bw_GBps *= count;
            topo.add_link(gpus[static_cast<std::size_t>(a)], gpus[static_cast<std::size_t>(b)],
                          spec);
          }
    }
    if (nodes > 1 && p.nics_per_node > 0) {
      const LinkSpec nic_link = spec_of(LinkKind::pcie, p.reference_bytes, p.remote_beta, 0.0);
      std::vector<NodeId> host_nics;
      for (int k = 0; k < p.nics_per_node; ++k) {
        host_nics.push_back(
            topo.add_node(Node{prefix + "nic" + std::to_string(k), NodeKind::nic, -1, host, -1}));
        nics.push_back(host_nics.back());
      }
      for (int local = 0; local < n; ++local)
        topo.add_duplex(gpus[static_cast<std::size_t>(local)],
                        host_nics[static_cast<std::size_t>(local * p.nics_per_node / n)], nic_link);
    }
  }
  if (!nics.empty()) {
    const NodeId ib = topo.add_node(Node{"ibswitch", NodeKind::switch_, -1, -1, -1});
    for (NodeId nic : nics) {
      topo.add_link(nic, ib,
                    spec_of(LinkKind::ib, p.reference_bytes, p.remote_beta, p.remote_alpha));
      topo.add_link(ib, nic, spec_of(LinkKind::ib, p.reference_bytes, p.remote_beta, 0.0));
    }
  }
  return topo;
}

}  // namespace

std::string_view to_string(TacclNodeKind kind) {
  switch (kind) {
    case TacclNodeKind::ndv2:
      return "NDv2";
    case TacclNodeKind::dgx2:
      return "DGX2";
    case TacclNodeKind::hub_and_spoke:
      return "HubAndSpoke";
    case TacclNodeKind::custom:
      break;
  }
  return "custom";
}

TacclTopology parse_taccl_topology(std::string_view text, const std::string& source, int nodes) {
  const json doc = support::parse_json_text(text, source);
  const support::FieldReader r(doc, "", source);
  if (nodes < 1)
    throw support::InputError(support::SourceLocation{source, 0, 0, "nnodes"},
                              "the number of nodes must be at least 1");
  TacclTopology result;
  result.profile = read_profile(r, source);
  if (nodes > 1 && result.profile.nics_per_node == 0)
    r.fail("nics_per_node", "missing: " + std::to_string(nodes) +
                                " nodes need the inter-node figures (nics_per_node, remote_alpha, "
                                "remote_beta, remote_invbw)");
  result.topology = build_topology(result.profile, nodes);
  result.topology.validate(source);
  return result;
}

TacclTopology read_taccl_topology(const std::string& path, int nodes) {
  return parse_taccl_topology(support::read_text_file(path), path, nodes);
}

}  // namespace optiflow::topology
