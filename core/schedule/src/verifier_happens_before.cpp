// Happens-before queries (see verifier_happens_before.hpp): fast paths inside a rank, then a
// search confined to the box that two topological orders put between the two steps.
#include "verifier_happens_before.hpp"

#include <algorithm>

namespace optiflow::schedule::verifier_detail {
namespace {

// Bounds on the clocks of all ranks together: entries kept, and entries joined to build them.
constexpr std::size_t kMaxClockEntries = std::size_t{1} << 24;
constexpr std::size_t kMaxClockWork = std::size_t{1} << 26;

std::uint32_t predecessor_count(const FlatSchedule& flat, StepId id) {
  return (id > flat.block_of(id).first ? 1u : 0u) +
         static_cast<std::uint32_t>(flat.deps(id).size()) +
         (flat.matching_send(id) != kNoStep ? 1u : 0u);
}

}  // namespace

// ---- Clocks inside a rank -----------------------------------------------------------------

void RankClocks::build(std::span<const StepId> order) {
  allocate();
  for (StepId id : order) tick(id);
}

bool RankClocks::reaches(StepId x, StepId y) const {
  if (base_.empty() || flat_.rank_of(x) != flat_.rank_of(y)) return false;
  const std::size_t clock = clock_of(y);
  if (clock == kNoClock) return false;
  return entries_[clock + local_block(x)] > static_cast<std::uint32_t>(flat_.index_in_block(x));
}

void RankClocks::allocate() {
  const std::span<const BlockId> first_block = flat_.first_block();
  const std::span<const FlatBlock> blocks = flat_.blocks();
  const std::size_t ranks = first_block.size() - 1;
  base_.assign(ranks, kNoClock);
  std::size_t entries = 0, work = 0;
  for (std::size_t rank = 0; rank < ranks; ++rank) {
    const std::size_t width = first_block[rank + 1] - first_block[rank];
    if (width == 0) continue;
    const StepId first = blocks[first_block[rank]].first;
    const StepId end = blocks[first_block[rank + 1] - 1].end;
    std::size_t joins = end - first;
    for (StepId id = first; id < end; ++id) joins += flat_.deps(id).size();
    if (entries + width * (end - first) > kMaxClockEntries || work + width * joins > kMaxClockWork)
      continue;
    base_[rank] = entries;
    entries += width * (end - first);
    work += width * joins;
  }
  entries_.assign(entries, 0);
}

// The order is topological, so the step's predecessors in the rank have their clocks.
void RankClocks::tick(StepId id) {
  const std::size_t clock = clock_of(id);
  if (clock == kNoClock) return;
  const std::size_t width = block_count(flat_.rank_of(id));
  auto join = [&](StepId before) {
    const std::size_t other = clock_of(before);
    for (std::size_t b = 0; b < width; ++b)
      entries_[clock + b] = std::max(entries_[clock + b], entries_[other + b]);
  };
  if (id > flat_.block_of(id).first) join(id - 1);
  for (StepId dep : flat_.deps(id)) join(dep);
  entries_[clock + local_block(id)] = static_cast<std::uint32_t>(flat_.index_in_block(id)) + 1;
}

std::size_t RankClocks::clock_of(StepId id) const {
  const auto rank = static_cast<std::size_t>(flat_.rank_of(id));
  if (base_[rank] == kNoClock) return kNoClock;
  const StepId rank_first = flat_.blocks()[flat_.first_block()[rank]].first;
  return base_[rank] + (id - rank_first) * block_count(flat_.rank_of(id));
}

std::size_t RankClocks::local_block(StepId id) const {
  return flat_.block_id(id) - flat_.first_block()[static_cast<std::size_t>(flat_.rank_of(id))];
}

std::size_t RankClocks::block_count(std::int32_t rank) const {
  const std::span<const BlockId> first_block = flat_.first_block();
  return first_block[static_cast<std::size_t>(rank) + 1] -
         first_block[static_cast<std::size_t>(rank)];
}

// ---- Queries ------------------------------------------------------------------------------

void HappensBefore::build_index() {
  indexed_ = true;
  clocks_.build(order_);
  places_.resize(flat_.step_count());
  for (std::size_t i = 0; i < order_.size(); ++i)
    places_[order_[i]].first = static_cast<std::uint32_t>(i);
  place_depth_first();
  visited_.assign(flat_.step_count(), 0);
  reach_.resize(flat_.blocks().size());
}

// Kahn's algorithm with a stack: it follows one chain as far as it goes before taking up
// another, where the given order (the symbolic execution's) advances all blocks in step.
void HappensBefore::place_depth_first() {
  std::vector<std::uint32_t> waiting(flat_.step_count(), 0);
  for (StepId id = 0; id < flat_.step_count(); ++id) {
    waiting[id] = predecessor_count(flat_, id);
    if (waiting[id] == 0 && places_[id].first != kNone) stack_.push_back(id);
  }
  std::uint32_t next = 0;
  while (!stack_.empty()) {
    const StepId id = stack_.back();
    stack_.pop_back();
    places_[id].second = next++;
    flat_.for_each_successor(id, [&](StepId successor) {
      // A receive without a matching send is short of nothing here, yet it never runs.
      if (--waiting[successor] == 0 && places_[successor].first != kNone)
        stack_.push_back(successor);
    });
  }
}

bool HappensBefore::precedes(StepId x, StepId y) {
  if (x == y || directly_precedes(x, y)) return true;
  if (!indexed_) build_index();
  if (!before_in_both(places_[x], places_[y])) return false;
  return clocks_.reaches(x, y) || precedes_by_round_trip(x, y) || search(x, y);
}

// The same block, or a dependency of y on x or on a later step of x's block.
bool HappensBefore::directly_precedes(StepId x, StepId y) const {
  if (flat_.block_id(x) == flat_.block_id(y)) return x <= y;
  const BlockId block = flat_.block_id(x);
  for (StepId dep : flat_.deps(y))
    if (flat_.block_id(dep) == block && dep >= x) return true;
  return false;
}

bool HappensBefore::locally_precedes(StepId x, StepId y) const {
  return directly_precedes(x, y) || clocks_.reaches(x, y);
}

// x's message, received on another rank, precedes there the send whose message y receives:
// the common way (a reduction to a peer and the result back) that two steps of one rank are
// ordered through another.
bool HappensBefore::precedes_by_round_trip(StepId x, StepId y) const {
  const StepId there = flat_.matching_receive(x), back = flat_.matching_send(y);
  return there != kNoStep && back != kNoStep && flat_.rank_of(there) == flat_.rank_of(back) &&
         before_in_both(places_[there], places_[back]) && locally_precedes(there, back);
}

// Depth-first from x inside the box between x and y, until a step that precedes y in its
// block, or in the block of one of y's deps (marked in reach_ beforehand), or by the clocks.
bool HappensBefore::search(StepId x, StepId y) {
  next_generation();
  mark_reach(flat_.block_id(y), y);
  for (StepId dep : flat_.deps(y)) mark_reach(flat_.block_id(dep), dep);
  stack_.assign(1, x);
  visited_[x] = generation_;
  while (!stack_.empty() && !exhausted()) {
    const StepId at = stack_.back();
    stack_.pop_back();
    ++searched_;
    if (at != x && reaches_directly(at, y)) return true;
    flat_.for_each_successor(at, [&](StepId next) {
      if (visited_[next] == generation_ || !inside(places_[next], places_[x], places_[y])) return;
      visited_[next] = generation_;
      stack_.push_back(next);
    });
  }
  return false;
}

void HappensBefore::next_generation() {
  if (++generation_ != 0) return;
  // The marks wrapped around: clear them.
  std::fill(visited_.begin(), visited_.end(), 0);
  for (Reach& reach : reach_) reach = Reach{};
  generation_ = 1;
}

void HappensBefore::mark_reach(BlockId block, StepId last) {
  Reach& reach = reach_[block];
  if (reach.generation != generation_ || reach.last < last) reach = Reach{generation_, last};
}

bool HappensBefore::reaches_directly(StepId at, StepId y) const {
  const Reach& reach = reach_[flat_.block_id(at)];
  if (reach.generation == generation_ && at <= reach.last) return true;
  return clocks_.reaches(at, y);
}

}  // namespace optiflow::schedule::verifier_detail
