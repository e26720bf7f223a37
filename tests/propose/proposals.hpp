// Shared by the proposer tests: program text in, one request's program text out.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "optiflow/dsl/parser.hpp"
#include "optiflow/propose/proposer.hpp"

namespace optiflow::propose::testing {

/// The printer's spelling of `text`: what a proposer returns for a program it leaves alone.
inline std::string canonical(const std::string& text) {
  return dsl::print_program(dsl::parse_program(text, "expected"));
}

/// A request with these parents' sources (1: mutate, 2: combine) and nothing else.
inline ProposalRequest request(const std::vector<std::string>& parents, std::uint64_t seed) {
  ProposalRequest r;
  for (const std::string& source : parents) {
    Parent parent;
    parent.source = source;
    r.parents.push_back(std::move(parent));
  }
  r.seed = seed;
  return r;
}

/// The single program that `proposer` makes for `r`.
inline std::string child_of(Proposer& proposer, const ProposalRequest& r) {
  const std::vector<std::vector<Proposal>> out = proposer.propose(std::span(&r, 1));
  if (out.size() != 1 || out[0].size() != 1) {
    ADD_FAILURE() << "expected one program for one request";
    return {};
  }
  return out[0][0].source;
}

}  // namespace optiflow::propose::testing
