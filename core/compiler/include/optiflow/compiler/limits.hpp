// What one compile may spend, and the errors for running past its time and for the compiler's
// own bugs.
//
// Every limit is checked before the memory it guards is allocated: the evaluator knows, from
// the pieces it cuts and the pipeline depth, how many transfers and chunks the compiled plan
// will have, and rejects the statement that would exceed them (docs/compiler.md, "Limits").
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "optiflow/support/error.hpp"

namespace optiflow::compiler {

/// Channels a schedule may use (NCCL's and MSCCL's MAXCHANNELS): `channels N` takes at most
/// this, and the channels pass keeps every transfer below it.
inline constexpr std::int32_t kMaxChannels = 32;

struct EvalLimits {
  /// Transfers of the compiled plan: each one the program makes counts once per pipeline
  /// slice, and twice for an All-Reduce (`phases`). 2^23 admits eight rings on 1,024 ranks
  /// (8,380,416 transfers), which compile in about 3 GB.
  std::size_t max_transfers = std::size_t{1} << 23;
  std::size_t max_pieces = std::size_t{1} << 17;
  std::size_t max_work = std::size_t{1} << 28;      ///< expression evaluations, tree edges, holders
  std::int64_t max_chunks = std::int64_t{1} << 16;  ///< per buffer
  /// Dependencies an All-Reduce adds where each root waits for the reductions into its data
  /// (a `direct` step makes (m-1)^2 per piece); the other passes make at most two per transfer.
  std::size_t max_join_dependencies = std::size_t{1} << 24;
  /// Copies of every transfer the collective makes: 2 for All-Reduce (Reduce-Scatter, then
  /// All-Gather). The compiler sets it.
  std::size_t phases = 1;
  /// Wall-clock budget, checked as evaluation works and between passes; max() = none.
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
};

/// An invariant of the compiler broke: a bug in a pass, never the program's or the topology's
/// fault (those are support::InputError, or dsl::DslError when located in the program).
class InternalError : public std::logic_error {
 public:
  explicit InternalError(const std::string& message)
      : std::logic_error("internal compiler error: " + message) {}
};

/// The compile ran past its deadline between two passes: neither the program's fault nor bad
/// input, so a caller that reports input errors does not take it for one. `what()` names the
/// program (`source`) as an input error's would.
class TimeLimitError : public std::runtime_error {
 public:
  TimeLimitError(const std::string& source, const std::string& message)
      : std::runtime_error(
            support::format_diagnostic(support::SourceLocation{source, 0, 0, {}}, message)) {}
};

}  // namespace optiflow::compiler
