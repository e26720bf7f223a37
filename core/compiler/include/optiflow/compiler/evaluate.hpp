// Evaluating a DSL program on a topology: intent -> the All-Gather transfers it implies.
#pragma once

#include <string>

#include "optiflow/compiler/plan.hpp"
#include "optiflow/dsl/ast.hpp"
#include "optiflow/topology/topology.hpp"

namespace optiflow::compiler {

/// Expands `program` into the All-Gather dissemination it describes on `topology`: rank r's
/// share [r/N, (r+1)/N) of the buffer starts on r; each step moves what its carriers hold
/// within each group (docs/dsl.md). Throws DslError located at the statement or expression at
/// fault, with `source` as the file and `text` for the caret line, among them any program whose
/// compiled plan would exceed `limits` (checked before the memory is spent).
Plan evaluate(const dsl::Program& program, const topology::Topology& topology,
              const std::string& source, const std::string& text, const EvalLimits& limits = {});

}  // namespace optiflow::compiler
