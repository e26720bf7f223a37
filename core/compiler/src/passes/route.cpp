// The route pass: the links each transfer crosses, each distinct path found and stored once.
#include <unordered_map>

#include "optiflow/topology/routing.hpp"
#include "pass_table.hpp"

namespace optiflow::compiler::passes {

void route(Plan& plan, const topology::Topology& topology, const ProgramText& program) {
  topology::Router router(topology);
  plan.routes.clear();
  std::vector<Index> explicit_ids(plan.explicit_routes.size(), -1);
  std::unordered_map<std::uint64_t, Index> default_ids;
  auto store = [&](std::vector<topology::LinkId> links) {
    plan.routes.push_back(std::move(links));
    return static_cast<Index>(plan.routes.size() - 1);
  };
  for (Transfer& t : plan.transfers) {
    if (t.explicit_route >= 0) {
      Index& id = explicit_ids[at(t.explicit_route)];
      if (id < 0) id = store(router.links_along(plan.explicit_routes[at(t.explicit_route)]));
      t.route = id;
      continue;
    }
    const auto ranks = static_cast<std::uint64_t>(plan.ranks);
    const std::uint64_t key =
        (static_cast<std::uint64_t>(t.avoid_set) * ranks + static_cast<std::uint64_t>(t.src)) *
            ranks +
        static_cast<std::uint64_t>(t.dst);
    const auto [it, inserted] = default_ids.try_emplace(key, -1);
    if (inserted) {
      auto links = router.path(topology.gpu_of_rank(t.src), topology.gpu_of_rank(t.dst),
                               plan.avoid_sets[at(t.avoid_set)]);
      if (links.empty())
        fail_at_statement(program, plan, t.statement,
                          "no route from rank " + std::to_string(t.src) + " to rank " +
                              std::to_string(t.dst) + " in topology '" + topology.name() +
                              "' (with the links the program avoids)");
      it->second = store(std::move(links));
    }
    t.route = it->second;
  }
}

void route_pass(CompileState& state) {
  route(state.plan, state.topology, state.text);
}

}  // namespace optiflow::compiler::passes
