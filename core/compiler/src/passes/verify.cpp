// The verify pass: the full schedule verifier on what emit made; a failure is a compiler bug.
#include "optiflow/schedule/verifier.hpp"
#include "pass_table.hpp"

namespace optiflow::compiler::passes {

bool verifying(const CompileOptions& options) {
  return options.verify;
}

void verify_pass(CompileState& state) {
  state.release_plan();
  const schedule::VerifyResult verdict =
      schedule::verify_schedule(state.result.schedule, &state.topology);
  if (!verdict.ok())
    throw InternalError("the schedule compiled from " + state.text.source +
                        " fails verification: " + verdict.summary());
}

}  // namespace optiflow::compiler::passes
