// The schedule IR's names (MSCCL's spellings) and the properties of its step kinds.
#include "optiflow/schedule/schedule.hpp"

#include <array>
#include <utility>

namespace optiflow::schedule {
namespace {

// What each step kind does with the network and its destination; docs/schedule-ir.md's table.
struct StepKindInfo {
  StepKind kind;
  std::string_view name;
  bool sends, receives, reduces;
};
constexpr std::array<StepKindInfo, 9> kStepKinds{{
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

constexpr std::array<std::pair<BufferKind, std::string_view>, 3> kBufferKinds{{
    {BufferKind::input, "i"},
    {BufferKind::output, "o"},
    {BufferKind::scratch, "s"},
}};

const StepKindInfo& info(StepKind kind) {
  for (const StepKindInfo& entry : kStepKinds)
    if (entry.kind == kind) return entry;
  return kStepKinds.back();  // unreachable: the table covers the enum
}

}  // namespace

std::string_view to_string(StepKind kind) {
  return info(kind).name;
}

std::optional<StepKind> step_kind_from_string(std::string_view name) {
  for (const StepKindInfo& entry : kStepKinds)
    if (entry.name == name) return entry.kind;
  return std::nullopt;
}

std::string_view to_string(BufferKind kind) {
  for (const auto& [value, name] : kBufferKinds)
    if (value == kind) return name;
  return "?";
}

std::optional<BufferKind> buffer_kind_from_string(std::string_view name) {
  for (const auto& [value, canonical] : kBufferKinds)
    if (canonical == name) return value;
  return std::nullopt;
}

bool step_sends(StepKind kind) {
  return info(kind).sends;
}
bool step_receives(StepKind kind) {
  return info(kind).receives;
}
bool step_reduces(StepKind kind) {
  return info(kind).reduces;
}

void set_protocol_by_size(Schedule& schedule,
                          std::span<const std::pair<std::uint64_t, std::string_view>> per_size) {
  schedule.protocol_by_size.clear();
  if (per_size.empty()) return;
  for (std::size_t i = 0; i + 1 < per_size.size(); ++i)
    if (per_size[i].second != per_size[i + 1].second)
      schedule.protocol_by_size.push_back({per_size[i].first, std::string(per_size[i].second)});
  schedule.protocol = std::string(per_size.back().second);
}

std::string_view Schedule::protocol_for(std::uint64_t size_bytes) const {
  for (const ProtocolRange& range : protocol_by_size)
    if (size_bytes <= range.max_bytes) return range.protocol;
  return protocol;
}

std::size_t Schedule::step_count() const {
  std::size_t count = 0;
  for (const RankProgram& program : programs)
    for (const ThreadBlock& tb : program.tbs) count += tb.steps.size();
  return count;
}

}  // namespace optiflow::schedule
