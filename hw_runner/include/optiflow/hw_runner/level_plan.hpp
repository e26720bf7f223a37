// The schedule cut into levels that every rank issues in the same order, for a runtime whose
// sends and receives are matched by group calls (NCCL): a send and the receive that takes its
// message are in one level, so each level is one ncclGroupStart/End on every rank, and anything
// that depends on a step is in a later level. A step that receives and sends (rcs, rrs, rrcs)
// receives in one level and sends in a later one.
//
// Every receive lands in a staging region of its own, so it can be posted in the level of its
// send whatever its block is doing; the step's local part (copy or reduce out of staging) runs
// in a later level, after the step's predecessors. Per level, a rank first runs its local work
// (cpy, re, nop, and those finishes), then the level's group.
#pragma once

#include <cstdint>
#include <vector>

#include "optiflow/schedule/flat_schedule.hpp"

namespace optiflow::hw_runner {

struct PlanLevel {
  /// cpy, re, nop, and the finish of receiving steps (r, rcs: dst = staged; rrc, rrcs: dst =
  /// src + staged; rrs: staged = src + staged)
  std::vector<schedule::StepId> local;
  /// The group: sends and receives, each ordered by the send's step id, so that between two
  /// ranks the k-th send issued is the k-th receive issued (NCCL matches them in order).
  std::vector<schedule::StepId> sends, recvs;
};

class LevelPlan {
 public:
  /// Throws support::InputError when some steps can never run (the schedule deadlocks even
  /// with unbounded connections), naming one of them.
  explicit LevelPlan(const schedule::FlatSchedule& flat);

  std::size_t level_count() const { return level_count_; }
  /// Rank `rank`'s part of every level (empty levels included, so ranks stay aligned).
  std::vector<PlanLevel> rank_levels(std::int32_t rank) const;
  /// Whether a step's receive lands in a staging region (every receive does), and that region's
  /// offset in chunks within its rank's staging buffer; staging_chunks(rank) is the buffer's size.
  static bool stages(schedule::StepKind kind);
  std::int64_t staging_offset(schedule::StepId step) const { return staging_offset_[step]; }
  std::int64_t staging_chunks(std::int32_t rank) const;

  /// The level each part of a step runs in (kNone where it has none): its receive, its local
  /// work (finish), its send.
  std::uint32_t recv_level(schedule::StepId step) const { return recv_level_[step]; }
  std::uint32_t finish_level(schedule::StepId step) const { return finish_level_[step]; }
  std::uint32_t send_level(schedule::StepId step) const { return send_level_[step]; }

 private:
  const schedule::FlatSchedule& flat_;
  std::vector<std::uint32_t> recv_level_, finish_level_, send_level_;
  std::vector<std::int64_t> staging_offset_, staging_total_;
  std::size_t level_count_ = 0;
};

}  // namespace optiflow::hw_runner
