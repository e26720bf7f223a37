// The happens-before order of a flattened schedule, for the verifier's race analysis: step x
// happens before step y when a chain of order edges leads from x to y. The edges: a block runs
// its steps in order; a step waits for its deps; the k-th send on a connection happens before
// the k-th receive (connections are unbounded FIFOs here, so no edge comes from slot limits).
// Internal to core (not installed).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "optiflow/schedule/flat_schedule.hpp"

namespace optiflow::schedule::verifier_detail {

// Per step, for each block of its rank, how many of that block's steps reach it along the edges
// that stay inside the rank (block order and deps). Their memory and the work of computing them
// grow with the rank's blocks times its steps, so only ranks where that is cheap get them.
class RankClocks {
 public:
  explicit RankClocks(const FlatSchedule& flat) : flat_(flat) {}
  /// Computes them, walking the steps in `order` (topological).
  void build(std::span<const StepId> order);

  /// Whether x reaches y inside their rank; false when they are on different ranks or theirs
  /// has no clocks (or they are not built).
  bool reaches(StepId x, StepId y) const;

 private:
  static constexpr std::size_t kNoClock = ~std::size_t{0};

  void allocate();
  void tick(StepId id);
  std::size_t clock_of(StepId id) const;
  std::size_t local_block(StepId id) const;
  std::size_t block_count(std::int32_t rank) const;

  const FlatSchedule& flat_;
  std::vector<std::size_t> base_;  // per rank: where its steps' clocks start, or kNoClock
  std::vector<std::uint32_t> entries_;
};

/// Answers "does x happen before y?" exactly, for x placed before y in one topological order of
/// the graph (the steps that run, in an order they can run in; `order` must outlive this).
/// Steps outside it never run and precede nothing. The index behind the slower answers (clocks,
/// a second order) is built on the first query that needs it: many schedules need none.
class HappensBefore {
 public:
  HappensBefore(const FlatSchedule& flat, std::span<const StepId> order)
      : flat_(flat), order_(order), clocks_(flat) {}

  /// Steps the searches may visit in all: a hostile schedule could otherwise make them
  /// quadratic. Real ones stay far below (a 1,024-rank ring All-Gather needs none).
  static constexpr std::uint64_t kMaxSearchSteps = std::uint64_t{1} << 30;

  bool precedes(StepId x, StepId y);
  /// Whether the searches have spent kMaxSearchSteps: precedes() has since answered false
  /// without knowing.
  bool exhausted() const { return searched_ > kMaxSearchSteps; }

 private:
  // Where a step lies in two topological orders. Any chain from x to y goes forward in both,
  // so a search for one need not leave the box between x and y; and a y behind x in either
  // order is never reached.
  struct Place {
    std::uint32_t first = kNone;   // the given order
    std::uint32_t second = kNone;  // a depth-first one, as unlike the first as cheaply possible
  };
  static bool before_in_both(Place a, Place b) { return a.first < b.first && a.second < b.second; }
  static bool inside(Place step, Place from, Place to) {
    return from.first <= step.first && step.first <= to.first && from.second <= step.second &&
           step.second <= to.second;
  }

  // During a search: the last step of a block known to precede y (y, or one of its deps).
  struct Reach {
    std::uint32_t generation = 0;
    StepId last = 0;
  };

  void build_index();
  void place_depth_first();
  bool directly_precedes(StepId x, StepId y) const;
  bool locally_precedes(StepId x, StepId y) const;
  bool precedes_by_round_trip(StepId x, StepId y) const;
  bool search(StepId x, StepId y);
  void next_generation();
  void mark_reach(BlockId block, StepId last);
  bool reaches_directly(StepId at, StepId y) const;

  const FlatSchedule& flat_;
  std::span<const StepId> order_;
  bool indexed_ = false;
  RankClocks clocks_;
  std::vector<Place> places_;
  std::vector<std::uint32_t> visited_;  // the search's marks, by generation
  std::vector<Reach> reach_;            // per block
  std::uint32_t generation_ = 0;
  std::vector<StepId> stack_;
  std::uint64_t searched_ = 0;  // steps the searches visited
};

}  // namespace optiflow::schedule::verifier_detail
