// The schedule IR: the one contract between the compiler, the baselines, the importers, the
// simulator, the hardware runner and the exporters.
//
// A schedule is independent of the buffer size: every buffer is cut into a whole number of
// chunks, offsets and counts are in chunks, and a chunk is `1 / chunks` of the collective's
// size S (nccl-tests convention: the All-Gather output, the Reduce-Scatter input, the
// All-Reduce buffer), exactly as MSCCL's nchunksperloop. Per rank, per thread block (a
// channel's worker with at most one send peer and one receive peer), an ordered list of steps
// with explicit dependencies; sends and receives between two ranks on one channel are matched
// in order (a FIFO connection per sender, receiver and channel), as in MSCCL.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "optiflow/support/collective.hpp"
#include "optiflow/topology/topology.hpp"

namespace optiflow::schedule {

/// MSCCL's buffers: i (input), o (output), s (scratch).
enum class BufferKind : std::uint8_t { input, output, scratch };

/// MSCCL's step types: s, r, rcs, rrc, rrs, rrcs, cpy, re, nop.
enum class StepKind : std::uint8_t {
  send,                   ///< s: send src to the thread block's send peer
  recv,                   ///< r: receive from the recv peer into dst
  recv_copy_send,         ///< rcs: receive into dst and forward it to the send peer
  recv_reduce_copy,       ///< rrc: dst = src + received
  recv_reduce_send,       ///< rrs: send (src + received) on, without storing it
  recv_reduce_copy_send,  ///< rrcs: dst = src + received, and forward dst
  copy,                   ///< cpy: local copy src -> dst
  reduce,                 ///< re: dst = dst + src (local)
  nop,                    ///< nop: only waits for its dependencies
};

/// "s", "r", "rcs", ... as in MSCCL XML; "i", "o", "s" for buffers.
std::string_view to_string(StepKind kind);
std::optional<StepKind> step_kind_from_string(std::string_view name);
std::string_view to_string(BufferKind kind);
std::optional<BufferKind> buffer_kind_from_string(std::string_view name);

namespace detail {
// What each step kind does with the network and its destination (docs/schedule-ir.md's table),
// indexed by the enum: the simulator and the verifier ask this for every step.
struct StepKindInfo {
  StepKind kind;
  std::string_view name;
  bool sends, receives, reduces;
};
inline constexpr std::array<StepKindInfo, 9> kStepKinds{{
    {StepKind::send, "s", true, false, false},
    {StepKind::recv, "r", false, true, false},
    {StepKind::recv_copy_send, "rcs", true, true, false},
    {StepKind::recv_reduce_copy, "rrc", false, true, true},
    {StepKind::recv_reduce_send, "rrs", true, true, true},
    {StepKind::recv_reduce_copy_send, "rrcs", true, true, true},
    {StepKind::copy, "cpy", false, false, false},
    {StepKind::reduce, "re", false, false, true},
    {StepKind::nop, "nop", false, false, false},
}};
constexpr bool in_enum_order() {
  for (std::size_t i = 0; i < kStepKinds.size(); ++i)
    if (static_cast<std::size_t>(kStepKinds[i].kind) != i) return false;
  return true;
}
static_assert(in_enum_order(), "info() indexes kStepKinds by the enum");
constexpr const StepKindInfo& info(StepKind kind) {
  return kStepKinds[static_cast<std::size_t>(kind)];
}
}  // namespace detail

/// Whether a step of this kind sends to / receives from a peer.
constexpr bool step_sends(StepKind kind) {
  return detail::info(kind).sends;
}
constexpr bool step_receives(StepKind kind) {
  return detail::info(kind).receives;
}
/// Whether it adds received or local data into its destination (rrc, rrs, rrcs, re).
constexpr bool step_reduces(StepKind kind) {
  return detail::info(kind).reduces;
}

/// A step of another thread block of the same rank.
struct StepRef {
  std::int32_t tb = -1;
  std::int32_t step = -1;
  bool operator==(const StepRef&) const = default;
  auto operator<=>(const StepRef&) const = default;
};

struct Step {
  StepKind kind = StepKind::nop;
  BufferKind src_buf = BufferKind::output;
  std::int32_t src_off = 0;  ///< in chunks
  BufferKind dst_buf = BufferKind::output;
  std::int32_t dst_off = 0;  ///< in chunks
  std::int32_t count = 0;    ///< in chunks
  /// Steps of this rank that must complete first (besides the previous step of this block).
  std::vector<StepRef> deps;
  /// For steps that send: the links the data crosses, from this rank's GPU to the peer's.
  /// Empty = unspecified (the simulator routes it). Only meaningful with the topology the
  /// schedule was compiled for.
  std::vector<topology::LinkId> route;

  bool operator==(const Step&) const = default;
};

struct ThreadBlock {
  std::int32_t send_peer = -1;  ///< rank this block sends to, -1 if none
  std::int32_t recv_peer = -1;  ///< rank this block receives from, -1 if none
  std::int32_t channel = 0;
  std::vector<Step> steps;

  bool operator==(const ThreadBlock&) const = default;
};

struct RankProgram {
  std::int32_t input_chunks = 0;    ///< MSCCL i_chunks (0 for in-place All-Gather)
  std::int32_t output_chunks = 0;   ///< MSCCL o_chunks
  std::int32_t scratch_chunks = 0;  ///< MSCCL s_chunks
  std::vector<ThreadBlock> tbs;

  bool operator==(const RankProgram&) const = default;
};

/// Up to `max_bytes` (the collective's size), run with `protocol`.
struct ProtocolRange {
  std::uint64_t max_bytes = 0;
  std::string protocol;
  bool operator==(const ProtocolRange&) const = default;
};

struct Schedule {
  std::string name;
  support::Collective collective = support::Collective::all_gather;
  std::int32_t ranks = 0;
  /// Chunks per loop: a chunk is S / chunks bytes. (MSCCL nchunksperloop.)
  std::int32_t chunks = 0;
  std::string protocol = "Simple";  ///< MSCCL proto: Simple, LL or LL128
  /// The protocol per size, as the compiler chose it: ranges by ascending max_bytes; sizes
  /// above the last range (or all sizes, when there is none) run with `protocol`.
  std::vector<ProtocolRange> protocol_by_size;
  /// In-place: rank r's own data starts in its output buffer at its own slice (All-Gather:
  /// chunks [r*chunks/N, (r+1)*chunks/N)), as MSCCL's inplace="1".
  bool inplace = true;
  std::string topology;               ///< name of the topology the routes refer to ("" if none)
  std::vector<RankProgram> programs;  ///< one per rank

  bool operator==(const Schedule&) const = default;

  std::size_t step_count() const;
  /// The protocol this schedule runs with at `size_bytes`.
  std::string_view protocol_for(std::uint64_t size_bytes) const;
};

/// Sets `protocol` and `protocol_by_size` from the protocol each size runs with, sizes
/// ascending: consecutive sizes with one protocol share a range, and the last size's protocol
/// is `protocol`, for every larger size too.
void set_protocol_by_size(Schedule& schedule,
                          std::span<const std::pair<std::uint64_t, std::string_view>> per_size);

/// The schedule with no routes and no topology name, so that it can be simulated on any
/// topology of its ranks (each transfer then takes the cheapest path there).
Schedule without_routes(Schedule schedule);

/// MSCCL's instances: `instances` copies of the schedule side by side, copy i on channels of
/// its own (i x the schedule's channels on) and on sub-chunk i of every chunk, so chunks grow
/// `instances`-fold. Sub-chunks of a rank's slice (the All-Gather output, the Reduce-Scatter
/// input) stay in that slice, so a step that spans slices is cut at their edges. Routes,
/// dependencies and matching carry over; verify the result like any schedule.
/// std::invalid_argument for instances < 1 (the caller checks what its user gave).
Schedule replicate_instances(const Schedule& schedule, int instances);

}  // namespace optiflow::schedule
