// The offline proposer's starting library: parametric programs instantiated for a topology.
#pragma once

#include <string>
#include <vector>

#include "optiflow/propose/proposer.hpp"

namespace optiflow::propose {

/// Template programs that make sense on `context.topology`, in a fixed order: rings,
/// multi-rings, trees, direct, recursive doubling, Bruck, hierarchical rail+host compositions,
/// tree packings, and weighted multi-path programs around slow GPUs' network links.
std::vector<std::string> template_programs(const ProposalContext& context);

}  // namespace optiflow::propose
