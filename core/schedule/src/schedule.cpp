// The schedule IR's names (MSCCL's spellings).
#include "optiflow/schedule/schedule.hpp"

#include <utility>

namespace optiflow::schedule {
namespace {

using detail::info;
using detail::kStepKinds;
using detail::StepKindInfo;

constexpr std::array<std::pair<BufferKind, std::string_view>, 3> kBufferKinds{{
    {BufferKind::input, "i"},
    {BufferKind::output, "o"},
    {BufferKind::scratch, "s"},
}};

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

Schedule without_routes(Schedule schedule) {
  schedule.topology.clear();
  for (RankProgram& program : schedule.programs)
    for (ThreadBlock& tb : program.tbs)
      for (Step& step : tb.steps) step.route.clear();
  return schedule;
}

}  // namespace optiflow::schedule
