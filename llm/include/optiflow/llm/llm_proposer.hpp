// The language-model proposer (`optiflow explore --proposer llm`): each request becomes one
// chat call whose reply holds several candidate programs; a rejected candidate goes back
// once with the compiler's message. Every call passes through the replay cache and is
// recorded in the store (docs/llm.md).
#pragma once

#include <memory>
#include <string>

#include "optiflow/llm/settings.hpp"
#include "optiflow/propose/proposer.hpp"

namespace optiflow::llm {

/// A proposer whose calls are recorded for context.run_id in the store at `db_path`. Throws
/// support::InputError for settings that cannot work (validate()).
std::unique_ptr<propose::Proposer> make_llm_proposer(const propose::ProposalContext& context,
                                                     const LlmSettings& settings,
                                                     const std::string& db_path);

}  // namespace optiflow::llm
