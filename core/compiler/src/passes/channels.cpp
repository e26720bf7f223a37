// The channels pass: pieces and their pipeline slices spread round-robin over the channels.
#include "pass_table.hpp"

namespace optiflow::compiler::passes {

void assign_channels(Plan& plan) {
  for (Transfer& t : plan.transfers) t.channel = (t.piece + t.slice) % plan.channels;
}

void channels_pass(CompileState& state) {
  assign_channels(state.plan);
}

}  // namespace optiflow::compiler::passes
