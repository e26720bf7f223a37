// The expand pass: the program, run on the topology's ranks, becomes the All-Gather's plan.
#include "optiflow/compiler/evaluate.hpp"
#include "pass_table.hpp"

namespace optiflow::compiler::passes {

void expand_pass(CompileState& state) {
  state.plan =
      evaluate(state.program, state.topology, state.text.source, state.text.text, state.limits);
}

}  // namespace optiflow::compiler::passes
