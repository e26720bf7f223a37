#include "hw_measure.hpp"

#include <deque>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

#include "inputs.hpp"
#include "optiflow/hw_runner/buffers.hpp"
#include "optiflow/hw_runner/launch.hpp"
#include "optiflow/hw_runner/measure.hpp"
#include "optiflow/schedule/schedule_io.hpp"

namespace optiflow::cli {
namespace {

std::string why_failed(int status) {
  switch (status) {
    case hw_runner::kWrongData:
      return "the job produced wrong data";
    case hw_runner::kTimedOut:
      return "the job timed out";
    case hw_runner::kNoDevice:
      return "no GPU for the NCCL backend";
    default:
      return "the job failed (launcher exit status " + std::to_string(status) + ")";
  }
}

// The last few non-empty lines of the job's log, joined: what a failure message shows of it.
std::string log_tail(const std::filesystem::path& log) {
  if (log.empty() || !std::filesystem::exists(log)) return {};
  std::istringstream in(read_text_file(log.string()));
  std::deque<std::string> lines;
  for (std::string line; std::getline(in, line);) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    lines.push_back(line);
    if (lines.size() > 3) lines.pop_front();
  }
  std::string text;
  for (const std::string& line : lines) text += (text.empty() ? "" : " | ") + line;
  return text;
}

}  // namespace

std::vector<double> run_on_hardware(const schedule::Schedule& schedule, const HwRun& run) {
  const std::filesystem::path schedule_path = run.work / "schedule.json",
                              results_path = run.work / "results.json";
  write_text_file(schedule_path.string(), schedule::write_schedule_json(schedule));
  std::filesystem::remove(results_path);  // a failed job must not leave an earlier one's times
  std::string sizes;
  for (std::uint64_t size : run.sizes) sizes += (sizes.empty() ? "" : ",") + std::to_string(size);
  std::vector<std::string> command{hw_runner::own_command_line().front(),
                                   "run",
                                   schedule_path.string(),
                                   "--topo",
                                   run.topology,
                                   "--backend",
                                   run.backend,
                                   "--no-native",
                                   "--sizes",
                                   sizes,
                                   "--iters",
                                   std::to_string(run.iters),
                                   "--results-json",
                                   results_path.string()};
  if (run.db.empty()) {
    command.push_back("--no-store");
  } else {
    command.insert(command.end(), {"--db", run.db});
  }
  hw_runner::LaunchOptions launch;
  launch.np = schedule.ranks;
  launch.job_timeout_s = run.job_timeout_s;
  launch.output = run.log.string();
  if (const int status = hw_runner::launch(launch, command); status != 0) {
    const std::string tail = log_tail(run.log);
    throw std::runtime_error(why_failed(status) + (tail.empty() ? "" : ": " + tail));
  }
  const auto measured = nlohmann::json::parse(read_text_file(results_path.string()));
  std::vector<double> times;
  // The job runs each size rounded to a whole number of the schedule's chunks of elements (4K
  // with 72 chunks runs 4032 bytes): that time stands for the size asked for.
  for (std::size_t i = 0; i < run.sizes.size(); ++i) {
    if (i >= measured.size() || measured[i].at("size_bytes").get<std::uint64_t>() !=
                                    hw_runner::round_size(schedule, run.sizes[i]))
      throw std::runtime_error("the job reported no time for size " + std::to_string(run.sizes[i]));
    times.push_back(measured[i].at("time_us").get<double>());
  }
  return times;
}

}  // namespace optiflow::cli
