// One proposal on its way through a run: where it came from, and once evaluated, its results.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "evaluator.hpp"
#include "optiflow/propose/proposer.hpp"

namespace optiflow::explore {

struct Candidate {
  std::int64_t seq = 0, iteration = 0;
  int island = -1;  ///< -1: a template, offered to every island
  std::string source, origin;
  std::int64_t model_call_id = 0;
  bool repaired = false;  ///< its proposer has had its second try
  Parsed parsed;          ///< its tree is dropped once compiled
  std::vector<std::int64_t> parent_ids;
  Compiled compiled;
  Simulated simulated;
  bool reused = false;  ///< the same program as an earlier candidate of this run

  /// What is stored: the canonical text, or the proposal as written when it does not parse.
  const std::string& stored_source() const {
    return parsed.canonical.empty() ? source : parsed.canonical;
  }
  const std::string& diagnostics() const {
    return parsed.canonical.empty() ? parsed.diagnostics : compiled.diagnostics;
  }
  bool ok() const { return !parsed.canonical.empty() && compiled.ok; }

  static Candidate of(propose::Proposal&& p) {
    Candidate c;
    c.source = std::move(p.source);
    c.origin = std::move(p.origin);
    c.model_call_id = p.model_call_id;
    return c;
  }
};

}  // namespace optiflow::explore
