#include "optiflow/hw_runner/measure.hpp"

#include <cstdio>

#include "optiflow/support/sizes.hpp"
#include "optiflow/support/units.hpp"

namespace optiflow::hw_runner {
namespace {

std::string format(const char* fmt, auto... args) {
  char buffer[512];
  std::snprintf(buffer, sizeof buffer, fmt, args...);
  return buffer;
}

std::string cells(const Measurement& m) {
  if (!m.measured && m.wrong == 0) return format("%10s %8s %8s %7s", "-", "-", "-", "-");
  if (!m.measured)
    return format("%10s %8s %8s %7llu", "-", "-", "-", static_cast<unsigned long long>(m.wrong));
  // Significant digits, not decimals: an oversubscribed CPU job moves kilobytes in milliseconds,
  // and its bandwidth must not print as zero.
  return format("%10.2f %8.4g %8.4g %7llu", m.time_us, m.algbw_GBps, m.busbw_GBps,
                static_cast<unsigned long long>(m.wrong));
}

}  // namespace

Measurement make_measurement(std::string name, support::Collective collective, std::int32_t ranks,
                             std::uint64_t size_bytes, double time_us, std::uint64_t wrong) {
  Measurement m;
  m.name = std::move(name);
  m.wrong = wrong;
  m.measured = wrong == 0 && time_us > 0;
  if (!m.measured) return m;
  m.time_us = time_us;
  m.algbw_GBps = support::GBps_of(static_cast<double>(size_bytes), time_us);
  m.busbw_GBps = m.algbw_GBps * support::busbw_factor(collective, ranks);
  return m;
}

std::string table_header(const JobInfo& job, const schedule::Schedule& schedule,
                         const RunOptions& options, const std::string& native_name) {
  std::string text = format(
      "# optiflow run: %s (%s, %d chunks, %zu steps) on %d ranks, backend %s (%s)\n",
      schedule.name.c_str(), std::string(support::to_string(schedule.collective)).c_str(),
      schedule.chunks, schedule.step_count(), job.ranks, job.backend.c_str(), job.library.c_str());
  std::string hosts;
  for (std::size_t r = 0; r < job.hosts.size(); ++r)
    if (r == 0 || job.hosts[r] != job.hosts[r - 1])
      hosts += (hosts.empty() ? "" : ", ") + job.hosts[r];
  text +=
      format("# hosts: %s; %d warm-up + %d timed iterations; uint32 elements, %s\n", hosts.c_str(),
             options.warmup_iters, options.iters, schedule.inplace ? "in place" : "out of place");
  if (!job.devices.empty()) text += "# devices: " + job.devices + "\n";
  text += format("#%9s %12s  %-37s  %-37s\n", "", "", ("schedule: " + schedule.name).c_str(),
                 native_name.c_str());
  text += format("#%9s %12s  %10s %8s %8s %7s  %10s %8s %8s %7s\n", "size", "count", "time_us",
                 "algbw", "busbw", "#wrong", "time_us", "algbw", "busbw", "#wrong");
  text += format("#%9s %12s  %10s %8s %8s %7s  %10s %8s %8s %7s\n", "(B)", "(elements)", "",
                 "(GB/s)", "(GB/s)", "", "", "(GB/s)", "(GB/s)", "");
  return text;
}

std::string table_row(const SizeResult& result) {
  return format("%10s %12llu  %s  %s\n", support::format_size(result.size_bytes).c_str(),
                static_cast<unsigned long long>(result.elements), cells(result.schedule).c_str(),
                cells(result.native).c_str());
}

}  // namespace optiflow::hw_runner
