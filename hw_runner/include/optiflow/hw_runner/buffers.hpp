// A rank's real buffers for one execution of a schedule at one size, the data pattern that
// fills them, and the check of every element against what the collective must produce.
//
// Elements are 32-bit unsigned integers: sums wrap around exactly (no rounding, whatever the
// order of a reduction), and every (rank, chunk, element) gets its own value, so a chunk
// written to the wrong place or summed twice shows up as wrong elements.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "optiflow/schedule/schedule.hpp"

namespace optiflow::hw_runner {

using Element = std::uint32_t;

/// The value rank `rank` contributes to element `element` of global chunk `chunk`.
constexpr Element pattern_value(std::int32_t rank, std::int64_t chunk, std::uint64_t element) {
  std::uint64_t v = (static_cast<std::uint64_t>(rank) + 1) * 0x9E3779B97F4A7C15ull ^
                    (static_cast<std::uint64_t>(chunk) + 1) * 0xC2B2AE3D27D4EB4Full ^
                    (element + 1) * 0x165667B19E3779F9ull;
  v ^= v >> 29;
  v *= 0xBF58476D1CE4E5B9ull;
  v ^= v >> 32;
  return static_cast<Element>(v);
}

/// What a buffer holds before the collective writes it (never a pattern value by design).
constexpr Element kPoison = 0xDEADBEEFu;

/// The sizes of one rank's buffers, in chunks, and how in-place buffers alias
/// (docs/schedule-ir.md, "Chunks, buffers, sizes").
struct BufferLayout {
  support::Collective collective = support::Collective::all_gather;
  std::int32_t rank = 0;
  std::int32_t ranks = 1;
  std::int32_t chunks = 0;      ///< the schedule's chunks per loop
  std::size_t chunk_elems = 0;  ///< elements per chunk at this size
  std::int64_t own_chunks = 0;  ///< s = chunks / ranks
  bool inplace = true;
  std::int64_t input_chunks = 0;  ///< capacity as the schedule addresses it
  std::int64_t output_chunks = 0;
  std::int64_t scratch_chunks = 0;

  /// `size_bytes` is the collective's size S (nccl-tests convention); it must be a multiple
  /// of chunks * sizeof(Element) (see round_size).
  static BufferLayout of(const schedule::Schedule& schedule, std::int32_t rank,
                         std::uint64_t size_bytes);
  /// Whether the input is (part of) the output memory, or the output part of the input.
  bool input_in_output() const;
  bool output_in_input() const;
};

/// The largest size <= `size_bytes` that cuts into whole elements per chunk (at least one).
std::uint64_t round_size(const schedule::Schedule& schedule, std::uint64_t size_bytes);

/// One rank's input, output and scratch memory, with in-place aliasing resolved.
class RankBuffers {
 public:
  explicit RankBuffers(const BufferLayout& layout);

  const BufferLayout& layout() const { return layout_; }
  /// `count` chunks of buffer `kind` from chunk `offset`; throws support::InputError when they
  /// lie outside the buffer (a schedule that was not verified).
  std::span<Element> chunks(schedule::BufferKind kind, std::int64_t offset, std::int64_t count);
  /// Where those chunks lie among the three allocations (in elements), for a copy of the
  /// buffers in device memory; checked like chunks().
  struct Region {
    schedule::BufferKind storage = schedule::BufferKind::output;
    std::size_t offset = 0, size = 0;
  };
  Region region(schedule::BufferKind kind, std::int64_t offset, std::int64_t count) const;
  /// The allocation itself (empty for a buffer that aliases another).
  std::span<Element> storage(schedule::BufferKind kind);
  /// Whole buffers as the collective sees them (the aliased views included).
  std::span<Element> input();
  std::span<Element> output();

  /// Input filled with this rank's contributions; output and scratch poisoned.
  void fill();
  /// Wrong elements of the output against the collective's postcondition.
  std::uint64_t count_wrong();

 private:
  BufferLayout layout_;
  std::vector<Element> input_, output_, scratch_;
};

}  // namespace optiflow::hw_runner
