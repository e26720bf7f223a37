// The plan's structural checks, run after every pass that changes its structure or routes.
#include <optional>

#include "passes.hpp"

namespace optiflow::compiler::passes {
namespace {

// Each stored route's first and last node, or nullopt when it is not a path of links.
std::vector<std::optional<std::pair<topology::NodeId, topology::NodeId>>> route_ends(
    const Plan& plan, const topology::Topology& topology) {
  std::vector<std::optional<std::pair<topology::NodeId, topology::NodeId>>> ends;
  for (const auto& links : plan.routes) {
    std::optional<std::pair<topology::NodeId, topology::NodeId>> end;
    if (!links.empty())
      end.emplace(topology.link(links.front()).src, topology.link(links.front()).src);
    for (topology::LinkId l : links) {
      if (!end || topology.link(l).src != end->second) {
        end.reset();
        break;
      }
      end->second = topology.link(l).dst;
    }
    ends.push_back(end);
  }
  return ends;
}

}  // namespace

std::string check_plan(const Plan& plan, const topology::Topology* topology) {
  if (plan.deps.size() != plan.transfers.size())
    return std::to_string(plan.deps.size()) + " dependency lists for " +
           std::to_string(plan.transfers.size()) + " transfers";
  const auto ends =
      topology ? route_ends(plan, *topology) : decltype(route_ends(plan, *topology)){};
  for (std::size_t i = 0; i < plan.transfers.size(); ++i) {
    const Transfer& t = plan.transfers[i];
    auto problem = [&](const std::string& what) {
      return "transfer " + std::to_string(i) + " (rank " + std::to_string(t.src) + " -> " +
             std::to_string(t.dst) + "): " + what;
    };
    if (t.src == t.dst || t.src < 0 || t.dst < 0 || t.src >= plan.ranks || t.dst >= plan.ranks)
      return problem("bad endpoints");
    if (!(t.data.begin < t.data.end)) return problem("empty data");
    for (std::int32_t d : plan.deps[i])
      if (d < 0 || at(d) >= i) return problem("depends on a later transfer");
    if (topology == nullptr) continue;
    if (t.route < 0 || at(t.route) >= plan.routes.size()) return problem("no route");
    const auto& end = ends[at(t.route)];
    if (!end) return problem("route is not a path");
    if (end->first != topology->gpu_of_rank(t.src) || end->second != topology->gpu_of_rank(t.dst))
      return problem("route ends elsewhere");
  }
  return {};
}

}  // namespace optiflow::compiler::passes
