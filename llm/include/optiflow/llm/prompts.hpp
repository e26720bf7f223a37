// What the model is told. Prompts are pure functions of the run's inputs and history (no
// times, no paths), so that an equal request is the same request and the replay cache can
// answer it.
#pragma once

#include <string>

#include "optiflow/propose/proposer.hpp"

namespace optiflow::llm {

/// The DSL reference (docs/dsl.md, built into the library).
std::string_view dsl_reference();

/// The role, the DSL reference, the collective's semantics, examples, and the reply format
/// (`candidates` programs, each in a fenced ```ofl block).
std::string system_prompt(support::Collective collective, int candidates);

/// The topology at a glance: link classes, per-GPU ingress/egress, the bottleneck cut and the
/// lower bound, then the sizes that matter with the bound and NCCL's time at each.
std::string task_header(const propose::ProposalContext& context);

/// The first request of a run: programs to start from. `header` is task_header()'s text.
std::string initial_prompt(const std::string& header, int candidates);

/// A request for improvements: the parents and the best programs so far with their results
/// per size and their busiest and idlest links, recent failures with the compiler's
/// messages, and the programs already tried.
std::string improve_prompt(const std::string& header, const propose::ProposalContext& context,
                           const propose::ProposalRequest& request, int candidates);

/// A second try for a program that did not compile, with the compiler's message.
std::string repair_prompt(const std::string& header, const propose::Rejection& rejected);

}  // namespace optiflow::llm
