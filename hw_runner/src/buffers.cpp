#include "optiflow/hw_runner/buffers.hpp"

#include <algorithm>
#include <string>

#include "optiflow/support/error.hpp"

namespace optiflow::hw_runner {
namespace {

using support::Collective;

[[noreturn]] void fail(const std::string& field, const std::string& message) {
  throw support::InputError(support::SourceLocation{"schedule", 0, 0, field}, message);
}

Element sum_over_ranks(std::int32_t ranks, std::int64_t chunk, std::uint64_t element) {
  Element sum = 0;
  for (std::int32_t r = 0; r < ranks; ++r) sum += pattern_value(r, chunk, element);
  return sum;
}

}  // namespace

std::uint64_t round_size(const schedule::Schedule& schedule, std::uint64_t size_bytes) {
  const std::uint64_t unit =
      static_cast<std::uint64_t>(std::max(schedule.chunks, 1)) * sizeof(Element);
  return std::max(unit, size_bytes / unit * unit);
}

BufferLayout BufferLayout::of(const schedule::Schedule& schedule, std::int32_t rank,
                              std::uint64_t size_bytes) {
  const Collective collective = schedule.collective;
  if (collective != Collective::all_gather && collective != Collective::reduce_scatter &&
      collective != Collective::all_reduce)
    fail("collective", "the runner executes allgather, reducescatter and allreduce, not " +
                           std::string(support::to_string(collective)));
  if (schedule.ranks <= 0 || schedule.chunks <= 0 ||
      (collective != Collective::all_reduce && schedule.chunks % schedule.ranks != 0))
    fail("chunks", std::to_string(schedule.chunks) + " chunks cannot be cut over " +
                       std::to_string(schedule.ranks) + " ranks");
  const std::uint64_t chunk_bytes = size_bytes / static_cast<std::uint64_t>(schedule.chunks);
  if (chunk_bytes == 0 || chunk_bytes % sizeof(Element) != 0 ||
      chunk_bytes * static_cast<std::uint64_t>(schedule.chunks) != size_bytes)
    fail("chunks", "size " + std::to_string(size_bytes) + " does not cut into " +
                       std::to_string(schedule.chunks) + " chunks of whole 4-byte elements");

  BufferLayout layout;
  layout.collective = collective;
  layout.rank = rank;
  layout.ranks = schedule.ranks;
  layout.chunks = schedule.chunks;
  layout.chunk_elems = chunk_bytes / sizeof(Element);
  layout.own_chunks = schedule.chunks / schedule.ranks;
  layout.inplace = schedule.inplace;
  const auto& program = schedule.programs.at(static_cast<std::size_t>(rank));
  const std::int64_t all = schedule.chunks, own = layout.own_chunks;
  const bool gather = collective == Collective::all_gather;
  const bool scatter = collective == Collective::reduce_scatter;
  layout.input_chunks = gather ? own : all;
  layout.output_chunks = scatter ? own : all;
  // A separate buffer may be declared larger than the collective needs; an aliased one is
  // exactly the part of the other buffer it stands for.
  if (!layout.input_in_output())
    layout.input_chunks = std::max<std::int64_t>(layout.input_chunks, program.input_chunks);
  if (!layout.output_in_input())
    layout.output_chunks = std::max<std::int64_t>(layout.output_chunks, program.output_chunks);
  layout.scratch_chunks = program.scratch_chunks;
  return layout;
}

bool BufferLayout::input_in_output() const {
  return inplace && collective != Collective::reduce_scatter;
}
bool BufferLayout::output_in_input() const {
  return inplace && collective == Collective::reduce_scatter;
}

RankBuffers::RankBuffers(const BufferLayout& layout) : layout_(layout) {
  const auto elems = [&](std::int64_t chunk_count) {
    return static_cast<std::size_t>(chunk_count) * layout.chunk_elems;
  };
  if (!layout.input_in_output()) input_.resize(elems(layout.input_chunks));
  if (!layout.output_in_input()) output_.resize(elems(layout.output_chunks));
  scratch_.resize(elems(layout.scratch_chunks));
}

RankBuffers::Region RankBuffers::region(schedule::BufferKind kind, std::int64_t offset,
                                        std::int64_t count) const {
  using schedule::BufferKind;
  const std::int64_t own_start = static_cast<std::int64_t>(layout_.rank) * layout_.own_chunks;
  Region where{kind, 0, 0};
  std::int64_t base_chunk = 0, capacity = 0;
  switch (kind) {
    case BufferKind::input:
      capacity = layout_.input_chunks;
      if (layout_.input_in_output()) {
        where.storage = BufferKind::output;
        base_chunk = layout_.collective == support::Collective::all_gather ? own_start : 0;
      }
      break;
    case BufferKind::output:
      capacity = layout_.output_chunks;
      if (layout_.output_in_input()) {
        where.storage = BufferKind::input;
        base_chunk = own_start;
      }
      break;
    case BufferKind::scratch:
      capacity = layout_.scratch_chunks;
      break;
  }
  if (offset < 0 || count < 0 || offset + count > capacity)
    fail(std::string(schedule::to_string(kind)),
         "rank " + std::to_string(layout_.rank) + " addresses chunks [" + std::to_string(offset) +
             ", " + std::to_string(offset + count) + ") of a " + std::to_string(capacity) +
             "-chunk buffer");
  where.offset = static_cast<std::size_t>(base_chunk + offset) * layout_.chunk_elems;
  where.size = static_cast<std::size_t>(count) * layout_.chunk_elems;
  return where;
}

std::span<Element> RankBuffers::storage(schedule::BufferKind kind) {
  switch (kind) {
    case schedule::BufferKind::input:
      return input_;
    case schedule::BufferKind::output:
      return output_;
    default:
      return scratch_;
  }
}

std::span<Element> RankBuffers::chunks(schedule::BufferKind kind, std::int64_t offset,
                                       std::int64_t count) {
  const Region where = region(kind, offset, count);
  return storage(where.storage).subspan(where.offset, where.size);
}

std::span<Element> RankBuffers::input() {
  return chunks(schedule::BufferKind::input, 0, layout_.input_chunks);
}
std::span<Element> RankBuffers::output() {
  return chunks(schedule::BufferKind::output, 0, layout_.output_chunks);
}

void RankBuffers::fill() {
  std::ranges::fill(output_, kPoison);
  std::ranges::fill(scratch_, kPoison);
  const bool gather = layout_.collective == support::Collective::all_gather;
  const std::int64_t first_chunk =
      gather ? static_cast<std::int64_t>(layout_.rank) * layout_.own_chunks : 0;
  const std::int64_t count = gather ? layout_.own_chunks : layout_.chunks;
  std::span<Element> in = chunks(schedule::BufferKind::input, 0, count);
  for (std::int64_t c = 0; c < count; ++c)
    for (std::size_t e = 0; e < layout_.chunk_elems; ++e)
      in[static_cast<std::size_t>(c) * layout_.chunk_elems + e] =
          pattern_value(layout_.rank, first_chunk + c, e);
}

std::uint64_t RankBuffers::count_wrong() {
  const std::int64_t own_start = static_cast<std::int64_t>(layout_.rank) * layout_.own_chunks;
  const bool scatter = layout_.collective == support::Collective::reduce_scatter;
  const std::int64_t count = scatter ? layout_.own_chunks : layout_.chunks;
  std::span<const Element> out = chunks(schedule::BufferKind::output, 0, count);
  std::uint64_t wrong = 0;
  for (std::int64_t c = 0; c < count; ++c)
    for (std::size_t e = 0; e < layout_.chunk_elems; ++e) {
      Element expected = 0;
      switch (layout_.collective) {
        case support::Collective::all_gather:
          expected = pattern_value(static_cast<std::int32_t>(c / layout_.own_chunks), c, e);
          break;
        case support::Collective::reduce_scatter:
          expected = sum_over_ranks(layout_.ranks, own_start + c, e);
          break;
        default:
          expected = sum_over_ranks(layout_.ranks, c, e);
      }
      wrong += out[static_cast<std::size_t>(c) * layout_.chunk_elems + e] != expected;
    }
  return wrong;
}

}  // namespace optiflow::hw_runner
