// MSCCL++'s execution-plan JSON (the format its Executor loads and mscclpp.language writes):
// export, so a schedule runs on MSCCL++ too, and import of what the export writes (the
// structural round trip). docs/formats.md, "MSCCL++ execution plan", says how steps map.
#pragma once

#include <string>
#include <string_view>

#include "optiflow/schedule/schedule.hpp"

namespace optiflow::schedule {

/// Writes the plan: per GPU its chunk counts, one memory channel per connection it is an end
/// of, the remote buffers it puts into, semaphores for cross-block dependencies, and per thread
/// block the ops (put + signal for a send, wait for a receive, copy, reduce, sem_acquire /
/// sem_release around dependent steps). A send puts straight into its receiver's destination;
/// a receive that reduces gets a staging region at the end of the receiver's scratch buffer.
/// Each thread block also carries the schedule's "channel" (the executor ignores it). Throws
/// InputError for a schedule that cannot be flattened (unpaired messages).
std::string write_mscclpp_plan(const Schedule& schedule);

/// Reads a plan written by write_mscclpp_plan back into a schedule: equal to the original
/// except for routes and protocol_by_size, which the plan does not carry.
Schedule parse_mscclpp_plan(std::string_view text, const std::string& source);

}  // namespace optiflow::schedule
