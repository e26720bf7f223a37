// What several passes share: errors at a statement, a plan's dependents, an empty copy of a
// plan, and the cost of each route.
#include "optiflow/dsl/parser.hpp"
#include "passes.hpp"

namespace optiflow::compiler::passes {

void fail_at_statement(const ProgramText& program, const Plan& plan, std::int32_t statement,
                       const std::string& message) {
  const StatementPos pos = statement >= 0 && at(statement) < plan.statements.size()
                               ? plan.statements[at(statement)]
                               : StatementPos{};
  throw dsl::DslError(support::SourceLocation{program.source, pos.line, pos.column, {}}, message,
                      dsl::source_line(program.text, pos.line));
}

Plan empty_like(const Plan& plan) {
  Plan out;
  out.ranks = plan.ranks;
  out.pipeline = plan.pipeline;
  out.channels = plan.channels;
  out.protocol = plan.protocol;
  out.chunks = plan.chunks;
  out.explicit_routes = plan.explicit_routes;
  out.avoid_sets = plan.avoid_sets;
  out.routes = plan.routes;
  out.statements = plan.statements;
  return out;
}

IndexLists dependents(const Plan& plan) {
  std::vector<std::uint32_t> counts(plan.transfers.size(), 0);
  for (std::size_t t = 0; t < plan.transfers.size(); ++t)
    for (Index d : plan.deps[t]) ++counts[at(d)];
  return gather_lists(counts, [&](auto place) {
    for (std::size_t t = 0; t < plan.transfers.size(); ++t)
      for (Index d : plan.deps[t]) place(at(d), static_cast<Index>(t));
  });
}

std::vector<topology::TransferCost> route_costs(const Plan& plan,
                                                const topology::Topology& topology,
                                                topology::Protocol protocol) {
  const topology::ProtocolCosts table = topology::table_costs(topology, protocol);
  std::vector<topology::TransferCost> costs;
  costs.reserve(plan.routes.size());
  for (const auto& route : plan.routes)
    costs.push_back(topology::transfer_cost(topology::route_cost(topology, route), table));
  return costs;
}

}  // namespace optiflow::compiler::passes
