#include "optiflow/topology/topology.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <set>
#include <utility>

#include "optiflow/support/error.hpp"

namespace optiflow::topology {
namespace {

constexpr NodeId kNoNode = std::numeric_limits<NodeId>::max();

constexpr std::array<std::pair<NodeKind, std::string_view>, 4> kNodeKindNames{{
    {NodeKind::gpu, "gpu"},
    {NodeKind::nic, "nic"},
    {NodeKind::switch_, "switch"},
    {NodeKind::cpu, "cpu"},
}};

constexpr std::array<std::pair<LinkKind, std::string_view>, 7> kLinkKindNames{{
    {LinkKind::nvlink, "nvlink"},
    {LinkKind::nvswitch, "nvswitch"},
    {LinkKind::pcie, "pcie"},
    {LinkKind::ib, "ib"},
    {LinkKind::ethernet, "ethernet"},
    {LinkKind::cpu, "cpu"},
    {LinkKind::other, "other"},
}};

template <typename Enum, std::size_t N>
std::string_view name_of(const std::array<std::pair<Enum, std::string_view>, N>& table, Enum e) {
  for (const auto& [value, name] : table)
    if (value == e) return name;
  return "?";
}

template <typename Enum, std::size_t N>
std::optional<Enum> value_of(const std::array<std::pair<Enum, std::string_view>, N>& table,
                             std::string_view name) {
  for (const auto& [value, text] : table)
    if (text == name) return value;
  return std::nullopt;
}

}  // namespace

std::string_view to_string(NodeKind kind) {
  return name_of(kNodeKindNames, kind);
}
std::string_view to_string(LinkKind kind) {
  return name_of(kLinkKindNames, kind);
}
std::optional<NodeKind> node_kind_from_string(std::string_view name) {
  return value_of(kNodeKindNames, name);
}
std::optional<LinkKind> link_kind_from_string(std::string_view name) {
  return value_of(kLinkKindNames, name);
}

NodeId Topology::add_node(Node node) {
  const auto id = static_cast<NodeId>(nodes_.size());
  nodes_.push_back(std::move(node));
  boost::add_vertex(graph_);
  index_rank(id);
  return id;
}

void Topology::index_rank(NodeId node) {
  const int rank = nodes_[node].rank;
  if (rank < 0) return;
  const auto slot = static_cast<std::size_t>(rank);
  if (slot >= gpu_by_rank_.size()) gpu_by_rank_.resize(slot + 1, kNoNode);
  if (gpu_by_rank_[slot] == kNoNode) gpu_by_rank_[slot] = node;
}

LinkId Topology::add_link(NodeId src, NodeId dst, const LinkSpec& spec) {
  const auto id = static_cast<LinkId>(links_.size());
  links_.push_back(Link{src, dst, spec.kind, spec.bw_GBps, spec.alpha_us});
  boost::add_edge(src, dst, EdgeRef{id}, graph_);
  return id;
}

LinkId Topology::add_duplex(NodeId a, NodeId b, const LinkSpec& spec) {
  const LinkId forward = add_link(a, b, spec);
  add_link(b, a, spec);
  return forward;
}

std::optional<NodeId> Topology::find_node(std::string_view id) const {
  for (NodeId n = 0; n < nodes_.size(); ++n)
    if (nodes_[n].id == id) return n;
  return std::nullopt;
}

std::vector<LinkId> Topology::out_links(NodeId node) const {
  std::vector<LinkId> result;
  for (auto [it, end] = boost::out_edges(node, graph_); it != end; ++it)
    result.push_back(graph_[*it].link);
  std::sort(result.begin(), result.end());
  return result;
}

std::vector<LinkId> Topology::in_links(NodeId node) const {
  std::vector<LinkId> result;
  for (auto [it, end] = boost::in_edges(node, graph_); it != end; ++it)
    result.push_back(graph_[*it].link);
  std::sort(result.begin(), result.end());
  return result;
}

int Topology::host_count() const {
  std::set<int> hosts;
  for (NodeId gpu : gpu_by_rank_)
    if (gpu != kNoNode && nodes_[gpu].host >= 0) hosts.insert(nodes_[gpu].host);
  return static_cast<int>(hosts.size());
}

const MessageBand* RuntimeCosts::band_for(double bytes) const {
  for (const MessageBand& band : bands)
    if (band.max_bytes == 0 || bytes <= static_cast<double>(band.max_bytes)) return &band;
  return bands.empty() ? nullptr : &bands.back();
}

namespace {

template <typename Fail>
void validate_runtime(const RuntimeCosts& runtime, const Fail& fail) {
  if (!(runtime.launch_us >= 0) || !std::isfinite(runtime.launch_us))
    fail("runtime.launch_us", "must be a non-negative number of microseconds");
  for (std::size_t i = 0; i < runtime.bands.size(); ++i) {
    const MessageBand& band = runtime.bands[i];
    const std::string field = "runtime.messages[" + std::to_string(i) + "]";
    if (!(band.alpha_us >= 0) || !std::isfinite(band.alpha_us))
      fail(field + ".alpha_us", "must be a non-negative number of microseconds");
    if (!(band.bw_factor > 0 && band.bw_factor <= 1))
      fail(field + ".bw_factor", "must be in (0, 1]: a share of the links' bandwidth");
    const bool last = i + 1 == runtime.bands.size();
    if (band.max_bytes == 0 && !last)
      fail(field + ".max_bytes", "only the last band may hold every larger message");
    if (i > 0 && band.max_bytes != 0 && band.max_bytes <= runtime.bands[i - 1].max_bytes)
      fail(field + ".max_bytes", "bands must be in ascending order of max_bytes");
  }
}

}  // namespace

void Topology::validate(const std::string& source) const {
  auto fail = [&](std::string field, const std::string& message) {
    throw support::InputError(support::SourceLocation{source, 0, 0, std::move(field)}, message);
  };
  auto node_field = [](std::size_t i) { return "nodes[" + std::to_string(i) + "]"; };

  std::set<std::string_view> ids;
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    const Node& n = nodes_[i];
    if (n.id.empty()) fail(node_field(i) + ".id", "must be a non-empty string");
    if (!ids.insert(n.id).second) fail(node_field(i) + ".id", "duplicate node id '" + n.id + "'");
    if (n.kind == NodeKind::gpu && n.rank < 0)
      fail(node_field(i) + ".rank", "gpu '" + n.id + "' needs a rank >= 0");
    if (n.kind != NodeKind::gpu && n.rank >= 0)
      fail(node_field(i) + ".rank",
           "only gpu nodes have ranks; '" + n.id + "' is a " + std::string(to_string(n.kind)));
  }
  for (std::size_t rank = 0; rank < gpu_by_rank_.size(); ++rank) {
    if (gpu_by_rank_[rank] == kNoNode)
      fail("nodes", "ranks must be dense 0.." + std::to_string(gpu_by_rank_.size() - 1) +
                        ", but no gpu has rank " + std::to_string(rank));
  }
  std::vector<int> rank_seen(gpu_by_rank_.size(), 0);
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    if (nodes_[i].rank < 0) continue;
    if (++rank_seen[static_cast<std::size_t>(nodes_[i].rank)] > 1)
      fail(node_field(i) + ".rank",
           "rank " + std::to_string(nodes_[i].rank) + " is used by more than one gpu");
  }
  for (std::size_t i = 0; i < links_.size(); ++i) {
    const Link& l = links_[i];
    const std::string field = "links[" + std::to_string(i) + "]";
    if (l.src == l.dst) fail(field, "self-loop on '" + nodes_[l.src].id + "'");
    if (!(l.bw_GBps > 0) || !(l.bw_GBps <= kMaxLinkGBps))
      fail(field + ".bw_GBps", "must be a positive number of GB/s, at most 1e6");
    if (!(l.alpha_us >= 0) || !std::isfinite(l.alpha_us))
      fail(field + ".alpha_us", "must be a non-negative number of microseconds");
  }
  if (!(op_overhead_us_ >= 0) || !std::isfinite(op_overhead_us_))
    fail("op_overhead_us", "must be a non-negative number of microseconds");
  if (runtime_) validate_runtime(*runtime_, fail);
}

}  // namespace optiflow::topology
