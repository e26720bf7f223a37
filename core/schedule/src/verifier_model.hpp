// Shared by the verifier's structural checks, its symbolic execution and its race analysis: the
// diagnostics collector, the names used in messages, symbolic values, and where each rank's
// buffers lie in one array of chunk slots. The schedule itself is walked as a FlatSchedule.
// Internal to core (not installed).
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "optiflow/schedule/flat_schedule.hpp"
#include "optiflow/schedule/verifier.hpp"

namespace optiflow::schedule::verifier_detail {

using ValueId = std::uint32_t;  // an interned value, see ValueTable

constexpr ValueId kNoValue = 0;   // the chunk holds nothing yet
constexpr ValueId kBadValue = 1;  // the result of an operation already reported as an error

// Malformed sizes must not exhaust memory: past these the verifier would need gigabytes.
// (Steps stay below 2^31 so that the race analysis can pack a step and a flag in 32 bits.)
constexpr std::size_t kMaxSlots = std::size_t{1} << 27;
constexpr std::size_t kMaxSteps = std::size_t{1} << 30;
constexpr std::size_t kMaxAccesses = std::size_t{1} << 27;  // chunk reads and writes in all
// How much of a deadlock and of a rank set to spell out.
constexpr std::size_t kDeadlockExamples = 4;
constexpr std::size_t kCycleStepsShown = 6;
constexpr std::size_t kRangesShown = 8;

// Collects errors into a VerifyResult. Text is built only while there is room for it, so a
// schedule with a million wrong chunks costs a million increments, not a million strings.
class Diagnostics {
 public:
  explicit Diagnostics(VerifyResult& result) : result_(result) {}

  /// Counts one error; returns the index of its text when it was kept.
  template <typename MakeText>
  std::optional<std::size_t> report(MakeText&& make_text) {
    ++result_.error_count;
    if (result_.errors.size() >= VerifyResult::kMaxReported) return std::nullopt;
    result_.errors.push_back(make_text());
    return result_.errors.size() - 1;
  }
  void append(std::size_t index, std::string_view text) { result_.errors[index] += text; }
  std::size_t count() const { return result_.error_count; }

 private:
  VerifyResult& result_;
};

// ---- Names in messages --------------------------------------------------------------------

constexpr std::array<std::string_view, 3> kBufferNames = {"input", "output", "scratch"};

inline bool is_valid(BufferKind kind) {
  return static_cast<std::size_t>(kind) < kBufferNames.size();
}
inline bool is_valid(StepKind kind) {
  return kind <= StepKind::nop;
}
inline std::string_view buffer_name(BufferKind kind) {
  return kBufferNames[static_cast<std::size_t>(kind)];
}

inline std::string block_label(std::int32_t rank, std::int64_t tb) {
  return "rank " + std::to_string(rank) + " tb " + std::to_string(tb);
}

inline std::string step_label(std::int32_t rank, std::int64_t tb, std::int64_t step,
                              StepKind kind) {
  const std::string kind_name = is_valid(kind) ? std::string(to_string(kind))
                                               : "kind " + std::to_string(static_cast<int>(kind));
  return block_label(rank, tb) + " step " + std::to_string(step) + " (" + kind_name + ")";
}

inline std::string step_label(const FlatSchedule& flat, StepId id) {
  const FlatBlock& block = flat.block_of(id);
  return step_label(block.rank, block.index, flat.index_in_block(id), flat.step(id).kind);
}

inline std::string chunk_label(BufferKind buffer, std::int64_t chunk) {
  return std::string(buffer_name(buffer)) + " chunk " + std::to_string(chunk);
}

inline std::string plural(std::int64_t n, std::string_view noun) {
  return std::to_string(n) + " " + std::string(noun) + (n == 1 ? "" : "s");
}

// ---- Values -------------------------------------------------------------------------------

// A set of ranks as sorted, disjoint, non-adjacent half-open ranges. Ring and tree reductions
// build contiguous sets, so even a partial sum over 1024 ranks takes one or two ranges.
struct RankRange {
  std::int32_t begin = 0;
  std::int32_t end = 0;
  bool operator==(const RankRange&) const = default;
};

inline bool is_single(std::span<const RankRange> ranks) {
  return ranks.size() == 1 && ranks[0].end - ranks[0].begin == 1;
}

// "{0,1,2}", "{0-511,700}"; long sets are cut short.
inline std::string format_ranks(std::span<const RankRange> ranks) {
  std::string text = "{";
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    if (i == kRangesShown) return text + ",...}";
    if (i > 0) text += ",";
    const auto [begin, end] = ranks[i];
    if (end - begin > 3) {
      text += std::to_string(begin) + "-" + std::to_string(end - 1);
      continue;
    }
    for (std::int32_t rank = begin; rank < end; ++rank)
      text += (rank > begin ? "," : "") + std::to_string(rank);
  }
  return text + "}";
}

// "3" for one rank, else as format_ranks.
inline std::string format_rank_or_ranks(std::span<const RankRange> ranks) {
  return is_single(ranks) ? std::to_string(ranks[0].begin) : format_ranks(ranks);
}

inline std::vector<RankRange> complement(std::span<const RankRange> ranks,
                                         std::int32_t rank_count) {
  std::vector<RankRange> missing;
  std::int32_t next = 0;
  for (const RankRange& range : ranks) {
    if (range.begin > next) missing.push_back({next, range.begin});
    next = range.end;
  }
  if (next < rank_count) missing.push_back({next, rank_count});
  return missing;
}

// Interned values (chunk index, contributing ranks): a chunk slot or a message holds a 4-byte
// id, so moving All-Gather data never copies a set. Values are immutable; a sum is a new value.
class ValueTable {
 public:
  ValueTable() : entries_(2) {}  // kNoValue and kBadValue

  ValueId single(std::int32_t chunk, std::int32_t rank) {
    entries_.push_back(Entry{chunk, 1, ranges_.size()});
    ranges_.push_back(RankRange{rank, rank + 1});
    return static_cast<ValueId>(entries_.size() - 1);
  }

  std::int32_t chunk(ValueId value) const { return entries_[value].chunk; }
  std::span<const RankRange> ranks(ValueId value) const {
    const Entry& entry = entries_[value];
    return std::span<const RankRange>(ranges_).subspan(entry.first, entry.size);
  }
  bool same(ValueId a, ValueId b) const {
    return a == b || (chunk(a) == chunk(b) && std::ranges::equal(ranks(a), ranks(b)));
  }

  /// a + b for two values of one chunk; kBadValue when they share contributors, which are then
  /// listed in `twice`.
  ValueId add(ValueId a, ValueId b, std::vector<RankRange>& twice) {
    const Entry left = entries_[a];
    const Entry right = entries_[b];
    const std::size_t start = ranges_.size();
    std::size_t i = left.first, j = right.first;
    const std::size_t i_end = left.first + left.size, j_end = right.first + right.size;
    while (i < i_end || j < j_end) {
      const bool take_left = j == j_end || (i < i_end && ranges_[i].begin <= ranges_[j].begin);
      const RankRange next = take_left ? ranges_[i++] : ranges_[j++];
      // Each input is disjoint and sorted, so an overlap with what is merged so far is an
      // overlap with the other input.
      if (ranges_.size() > start && next.begin <= ranges_.back().end) {
        RankRange& last = ranges_.back();
        if (next.begin < last.end) twice.push_back({next.begin, std::min(next.end, last.end)});
        last.end = std::max(last.end, next.end);
        continue;
      }
      ranges_.push_back(next);
    }
    if (!twice.empty()) {
      ranges_.resize(start);
      return kBadValue;
    }
    entries_.push_back(
        Entry{left.chunk, static_cast<std::uint32_t>(ranges_.size() - start), start});
    return static_cast<ValueId>(entries_.size() - 1);
  }

  /// "rank 2's chunk 8" or "the sum of chunk 8 over ranks {0,1,2}".
  std::string describe(ValueId value) const {
    const std::string chunk_text = "chunk " + std::to_string(chunk(value));
    const auto contributors = ranks(value);
    if (is_single(contributors))
      return "rank " + std::to_string(contributors[0].begin) + "'s " + chunk_text;
    return "the sum of " + chunk_text + " over ranks " + format_ranks(contributors);
  }

 private:
  struct Entry {
    std::int32_t chunk = -1;
    std::uint32_t size = 0;
    std::size_t first = 0;  // into ranges_
  };
  std::vector<Entry> entries_;
  std::vector<RankRange> ranges_;
};

// ---- Buffers ------------------------------------------------------------------------------

// The collective's shape: the table in docs/schedule-ir.md.
struct Shape {
  support::Collective collective = support::Collective::all_gather;
  std::int32_t ranks = 0;
  std::int32_t chunks = 0;
  std::int32_t slice = 0;  // s = chunks / ranks, one rank's share
  bool inplace = false;

  bool gathers() const { return collective == support::Collective::all_gather; }
  /// The size of the input or output buffer, aliased or not.
  std::int32_t buffer_chunks(BufferKind kind) const {
    if (kind == BufferKind::input) return gathers() ? slice : chunks;
    return collective == support::Collective::reduce_scatter ? slice : chunks;
  }
  /// Whether, in place, the buffer is (part of) the other one: MSCCL then declares it with 0
  /// chunks (i_chunks="0" for All-Gather, o_chunks="0" for All-Reduce).
  bool aliased(BufferKind kind) const {
    if (!inplace) return false;
    if (collective == support::Collective::all_reduce) return true;
    return kind == (gathers() ? BufferKind::input : BufferKind::output);
  }
};

// What a step kind does with its buffer operands (docs/schedule-ir.md's table): `re` is the
// only kind that reads its destination.
struct Operands {
  bool reads_src = false;
  bool reads_dst = false;
  bool writes_dst = false;

  bool uses_dst() const { return reads_dst || writes_dst; }
};

inline Operands operands(StepKind kind) {
  switch (kind) {
    case StepKind::send:
    case StepKind::recv_reduce_send:
      return {true, false, false};
    case StepKind::recv:
    case StepKind::recv_copy_send:
      return {false, false, true};
    case StepKind::reduce:
      return {true, true, true};
    case StepKind::nop:
      return {false, false, false};
    default:
      return {true, false, true};
  }
}

struct BufferSpan {
  std::size_t base = 0;  // first slot
  std::int32_t size = 0;

  bool contains(std::size_t slot) const {
    return slot >= base && slot - base < static_cast<std::size_t>(size);
  }
};

// Where a rank's buffers lie in one flat array of chunk slots. In-place aliasing is two buffers
// whose spans overlap, so neither execution nor the race analysis has to know about it.
struct RankLayout {
  std::array<BufferSpan, 3> buffers;
  BufferSpan& operator[](BufferKind kind) { return buffers[static_cast<std::size_t>(kind)]; }
  const BufferSpan& operator[](BufferKind kind) const {
    return buffers[static_cast<std::size_t>(kind)];
  }
};

// The verifier's own view of memory, built by the structural checks: valid only when they pass.
struct BufferLayout {
  Shape shape;
  std::vector<RankLayout> ranks;  // per rank
  std::size_t slot_count = 0;

  std::size_t slot(std::int32_t rank, BufferKind buffer, std::int64_t chunk) const {
    return ranks[static_cast<std::size_t>(rank)][buffer].base + static_cast<std::size_t>(chunk);
  }
};

// ---- Structure ----------------------------------------------------------------------------

inline std::string node_name(const topology::Topology& topology, topology::NodeId node) {
  return node < topology.node_count() ? topology.node(node).id : "no node";
}

inline std::string link_text(const topology::Topology& topology, topology::LinkId id) {
  const topology::Link& link = topology.link(id);
  return "link " + std::to_string(id) + " (" + node_name(topology, link.src) + " -> " +
         node_name(topology, link.dst) + ")";
}

/// Reports every structural error of `schedule` (and of its routes on `topology`), so that
/// malformed input can crash neither flattening nor execution, and fills `layout` on the way;
/// returns whether the schedule may be flattened and executed.
bool check_structure(const Schedule& schedule, const topology::Topology* topology,
                     Diagnostics& diagnostics, BufferLayout& layout);

// ---- Analyses over the flattened schedule -------------------------------------------------

/// Reports every pair of accesses to one chunk slot, at least one a write, that no chain of
/// program order, dependencies and messages orders (docs/schedule-ir.md, "Verification").
/// `order` lists the steps that can run, in an order they can run in (a topological order of
/// the happens-before graph, such as the symbolic execution's).
void report_races(const FlatSchedule& flat, const BufferLayout& layout,
                  std::span<const StepId> order, Diagnostics& diagnostics);

}  // namespace optiflow::schedule::verifier_detail
