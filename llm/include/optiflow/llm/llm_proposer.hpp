// The language-model proposer (`optiflow explore --proposer llm`): each request becomes one
// chat call whose reply holds several candidate programs; a rejected candidate goes back
// once with the compiler's message. Every call is recorded in the store in the order made, and
// a replay answers the same calls in the same order (docs/llm.md).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "optiflow/llm/settings.hpp"
#include "optiflow/propose/proposer.hpp"

namespace optiflow::llm {

/// The seed a run's call number `position` sends (and hashes) for a request whose own seed is
/// `request_seed`: every call of a live run is a new sample, even of a prompt asked before.
std::uint64_t call_seed(std::uint64_t request_seed, std::int64_t position);

/// A proposer whose calls are recorded for context.run_id in the store at `db_path`. A run
/// that already has calls recorded (a resumed run) gets its own recorded answers, call by
/// call, before it calls again. Throws support::InputError for settings that cannot work
/// (validate()).
std::unique_ptr<propose::Proposer> make_llm_proposer(const propose::ProposalContext& context,
                                                     const LlmSettings& settings,
                                                     const std::string& db_path);

}  // namespace optiflow::llm
