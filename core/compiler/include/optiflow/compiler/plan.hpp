// The compiler's working form between the DSL and the schedule IR: a list of transfers of
// exact fractions of the buffer between ranks, with the dependencies that carry data.
#pragma once

#include <cstdint>
#include <vector>

#include "optiflow/compiler/limits.hpp"
#include "optiflow/support/rational.hpp"
#include "optiflow/topology/topology.hpp"

namespace optiflow::compiler {

/// [begin, end) as fractions of the collective's buffer (All-Gather: the output).
struct Interval {
  support::Rational begin;
  support::Rational end;
  bool operator==(const Interval&) const = default;
};

/// Moving one interval from one rank to another. Until the pass `assign_chunks`, `data` is
/// exact fractions; after it, `first_chunk`/`chunk_count` say the same in chunks.
struct Transfer {
  std::int32_t src = 0;
  std::int32_t dst = 0;
  Interval data;
  std::int64_t first_chunk = 0;
  std::int64_t chunk_count = 0;
  bool reduce = false;  ///< the receiver adds the data into its own (Reduce-Scatter phase)
  /// Transfers whose data `src` must hold (All-Gather: the one that delivered it) or have added
  /// in (Reduce-Scatter: its children's) before this one may start.
  std::vector<std::int32_t> deps;
  std::int32_t stage = 0;            ///< which step of the program made it (program order)
  std::int32_t round = 0;            ///< the pattern's round within the step
  std::int32_t piece = 0;            ///< which piece of data, for spreading over channels
  std::int32_t slice = 0;            ///< which of the `pipeline` slices of the piece
  std::int32_t explicit_route = -1;  ///< index into Plan::explicit_routes, -1 = route it
  std::int32_t avoid_set = 0;        ///< index into Plan::avoid_sets (0: avoid nothing)
  std::int32_t statement = -1;       ///< index into Plan::statements: the step that made it
  // Filled by the passes:
  std::vector<topology::LinkId> route;
  double start_us = 0;
  double finish_us = 0;
  std::int32_t channel = 0;
};

/// Where a statement is in the program text (1-based), so that passes after evaluation can
/// point their errors at the step responsible.
struct StatementPos {
  int line = 0;
  int column = 0;
  bool operator==(const StatementPos&) const = default;
};

struct Plan {
  std::int32_t ranks = 0;
  std::int32_t pipeline = 1;        ///< the program's `pipeline` depth
  std::int32_t channels = 1;        ///< the program's `channels`
  std::int64_t chunks = 0;          ///< set by assign_chunks
  std::vector<Transfer> transfers;  ///< every dependency points to a lower index
  std::vector<std::vector<topology::NodeId>>
      explicit_routes;                                    ///< node paths from `route` and `bfs`
  std::vector<std::vector<topology::LinkId>> avoid_sets;  ///< [0] is empty
  std::vector<StatementPos> statements;                   ///< the steps transfers come from
};

}  // namespace optiflow::compiler
