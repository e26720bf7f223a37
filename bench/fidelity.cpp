// Fidelity against published measurements (docs/fidelity.md): reads the transcribed nccl-tests
// All-Gather rows (datasets/published/nccl-tests-allgather.csv), simulates each on the built-in
// topology of its hardware, and prints markdown tables of measured vs simulated time, the error
// per row, and the median and worst absolute error per system and overall. NCCL rows run the
// `nccl` baseline (NCCL's rings, the protocol its tuner picks) and show NCCL's own tuner
// estimate beside it; MSCCL rows run the schedule XML the row names, read from the external
// data folder (shared/external), or say why they are not simulated.
// A row given only as bus bandwidth becomes a time by the nccl-tests definition:
// time = size * (N-1)/N / busbw.
// Usage: optiflow_fidelity [CSV] [--external DIR]
#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "optiflow/baselines/baseline.hpp"
#include "optiflow/schedule/msccl_xml.hpp"
#include "optiflow/schedule/verifier.hpp"
#include "optiflow/sim/simulator.hpp"
#include "optiflow/support/collective.hpp"
#include "optiflow/support/error.hpp"
#include "optiflow/support/sizes.hpp"
#include "optiflow/support/text_file.hpp"
#include "optiflow/support/units.hpp"
#include "optiflow/topology/generators.hpp"

namespace {

using namespace optiflow;

// Issue 9's goal for the simulation's absolute error, in percent.
constexpr double kGoalMedianPct = 15.0, kGoalWorstPct = 35.0;

// The GPU named in a row's hardware, and the built-in family of that node (8 GPUs each).
struct HardwareFamily {
  std::string_view gpu;
  std::string_view topology_prefix;
};
constexpr std::array<HardwareFamily, 2> kFamilies{{{"A100", "a100x"}, {"H100", "h100x"}}};
constexpr int kGpusPerNode = 8;

// One published measurement, as the CSV gives it.
struct Measurement {
  int line = 0;
  std::string source_id, library, hardware, schedule, topology;
  int nodes = 0, gpus = 0;
  std::uint64_t size_bytes = 0;
  double measured_us = 0;
  std::optional<double> busbw_GBps;  ///< set when measured_us was derived from it
};

// What the simulator (and, for NCCL, NCCL's tuner) makes of one measurement.
struct Outcome {
  const Measurement* row = nullptr;
  std::optional<double> sim_us, model_us;
  std::string protocol;
  std::string why_not;  ///< when sim_us is empty
};

using CsvRecord = std::vector<std::string>;

[[noreturn]] void fail(const std::string& file, int line, const std::string& field,
                       const std::string& message) {
  throw support::InputError(support::SourceLocation{file, line, 0, field}, message);
}

// RFC 4180 records: fields separated by commas, quoted with '"' ("" inside quotes is one '"').
// Returns the records with the line each starts on.
std::vector<std::pair<int, CsvRecord>> parse_csv(const std::string& text, const std::string& file) {
  std::vector<std::pair<int, CsvRecord>> records;
  CsvRecord record;
  std::string field;
  bool quoted = false, any = false;
  int line = 1, record_line = 1;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"') {
        field += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        if (c == '\n') ++line;
        field += c;
      }
    } else if (c == '"') {
      quoted = any = true;
    } else if (c == ',') {
      record.push_back(std::move(field));
      field.clear();
      any = true;
    } else if (c == '\n' || c == '\r') {
      if (c == '\r' && i + 1 < text.size() && text[i + 1] == '\n') ++i;
      if (any || !field.empty()) {
        record.push_back(std::move(field));
        records.emplace_back(record_line, std::move(record));
      }
      field.clear();
      record.clear();
      any = false;
      record_line = ++line;
    } else {
      field += c;
    }
  }
  if (quoted) fail(file, record_line, {}, "unterminated quoted field");
  if (any || !field.empty()) {
    record.push_back(std::move(field));
    records.emplace_back(record_line, std::move(record));
  }
  return records;
}

template <typename Number>
Number parse_number(const std::string& text, const std::string& file, int line,
                    const std::string& column) {
  Number value{};
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc{} || end != text.data() + text.size() || text.empty())
    fail(file, line, column, "'" + text + "' is not a number");
  return value;
}

std::string builtin_topology(const Measurement& m, const std::string& file) {
  if (m.gpus != kGpusPerNode * m.nodes)
    fail(file, m.line, "gpus",
         std::to_string(m.nodes) + " nodes with " + std::to_string(m.gpus) +
             " GPUs: the built-ins have 8 GPUs per node");
  for (const HardwareFamily& family : kFamilies)
    if (m.hardware.find(family.gpu) != std::string::npos)
      return std::string(family.topology_prefix) + std::to_string(m.nodes);
  fail(file, m.line, "hardware", "no built-in topology for '" + m.hardware + "'");
}

std::vector<Measurement> read_measurements(const std::string& path) {
  const auto records = parse_csv(support::read_text_file(path), path);
  if (records.empty()) fail(path, 1, {}, "empty file");
  std::map<std::string, std::size_t> column;
  for (std::size_t i = 0; i < records.front().second.size(); ++i)
    column[records.front().second[i]] = i;
  for (const char* name : {"source_id", "library", "hardware", "nodes", "gpus", "size_bytes",
                           "time_us", "busbw_GBps", "schedule"})
    if (!column.contains(name)) fail(path, 1, name, "missing column");

  std::vector<Measurement> rows;
  for (std::size_t r = 1; r < records.size(); ++r) {
    const auto& [line, record] = records[r];
    if (record.size() != records.front().second.size())
      fail(path, line, {},
           std::to_string(record.size()) + " fields, the header has " +
               std::to_string(records.front().second.size()));
    const auto get = [&](const char* name) -> const std::string& { return record[column[name]]; };
    Measurement m;
    m.line = line;
    m.source_id = get("source_id");
    m.library = get("library");
    m.hardware = get("hardware");
    m.schedule = get("schedule");
    m.nodes = parse_number<int>(get("nodes"), path, line, "nodes");
    m.gpus = parse_number<int>(get("gpus"), path, line, "gpus");
    m.size_bytes = parse_number<std::uint64_t>(get("size_bytes"), path, line, "size_bytes");
    if (m.library != "NCCL" && m.library != "MSCCL")
      fail(path, line, "library", "'" + m.library + "' (NCCL | MSCCL)");
    if (!get("time_us").empty()) {
      m.measured_us = parse_number<double>(get("time_us"), path, line, "time_us");
    } else if (!get("busbw_GBps").empty()) {
      m.busbw_GBps = parse_number<double>(get("busbw_GBps"), path, line, "busbw_GBps");
      const double factor = support::busbw_factor(support::Collective::all_gather, m.gpus);
      m.measured_us =
          support::transfer_us(static_cast<double>(m.size_bytes) * factor, *m.busbw_GBps);
    } else {
      fail(path, line, "time_us", "neither time_us nor busbw_GBps is given");
    }
    m.topology = builtin_topology(m, path);
    rows.push_back(std::move(m));
  }
  return rows;
}

// NCCL rows: the `nccl` baseline once per topology, at every size measured there.
std::vector<Outcome> simulate_nccl(const std::vector<Measurement>& rows) {
  std::map<std::string, std::vector<std::uint64_t>> sizes;
  for (const Measurement& m : rows)
    if (m.library == "NCCL") sizes[m.topology].push_back(m.size_bytes);
  std::map<std::pair<std::string, std::uint64_t>, baselines::BaselineRow> by_size;
  for (const auto& [name, list] : sizes) {
    const topology::Topology topo = *topology::make_builtin_topology(name);
    for (auto& row :
         baselines::run_baseline("nccl", topo, support::Collective::all_gather, list).rows)
      by_size[{name, row.size_bytes}] = std::move(row);
  }
  std::vector<Outcome> outcomes;
  for (const Measurement& m : rows) {
    if (m.library != "NCCL") continue;
    const baselines::BaselineRow& row = by_size.at({m.topology, m.size_bytes});
    outcomes.push_back(Outcome{
        &m, row.sim.time_us, row.model_us, std::string(topology::to_string(row.sim.protocol)), {}});
  }
  return outcomes;
}

// MSCCL rows: the schedule XML each names, verified, on its topology.
std::vector<Outcome> simulate_msccl(const std::vector<Measurement>& rows,
                                    const std::filesystem::path& external_dir) {
  std::vector<Outcome> outcomes;
  for (const Measurement& m : rows) {
    if (m.library != "MSCCL") continue;
    Outcome out{&m, {}, {}, {}, {}};
    const std::filesystem::path file = external_dir / m.schedule;
    if (m.schedule.empty()) {
      out.why_not = "not simulated: no schedule here";
    } else if (!std::filesystem::is_regular_file(file)) {
      out.why_not = "not simulated: " + m.schedule + " is not in " + external_dir.string();
    } else {
      try {
        const topology::Topology topo = *topology::make_builtin_topology(m.topology);
        const schedule::Schedule schedule = schedule::read_msccl_xml_file(file.string());
        const schedule::VerifyResult verdict = schedule::verify_schedule(schedule, &topo);
        if (!verdict.ok()) {
          out.why_not = "not simulated: fails verification: " + verdict.errors.front();
        } else {
          const sim::SimResult result = sim::Simulator(topo, schedule).run(m.size_bytes);
          out.sim_us = result.time_us;
          out.protocol = std::string(topology::to_string(result.protocol));
        }
      } catch (const support::InputError& error) {
        out.why_not = std::string("not simulated: ") + error.what();
      }
    }
    outcomes.push_back(std::move(out));
  }
  return outcomes;
}

double error_pct(double estimate_us, double measured_us) {
  return 100.0 * (estimate_us - measured_us) / measured_us;
}

// Median (the mean of the middle two for an even count) and largest absolute error, in percent.
struct ErrorStats {
  std::size_t rows = 0;
  double median_pct = 0, worst_pct = 0;
  std::string worst_at;  ///< "topology size" of the worst row
};

ErrorStats error_stats(const std::vector<const Outcome*>& outcomes, bool model) {
  std::vector<std::pair<double, const Outcome*>> errors;
  for (const Outcome* o : outcomes) {
    const std::optional<double>& estimate = model ? o->model_us : o->sim_us;
    if (estimate) errors.emplace_back(std::abs(error_pct(*estimate, o->row->measured_us)), o);
  }
  ErrorStats stats;
  stats.rows = errors.size();
  if (errors.empty()) return stats;
  std::sort(errors.begin(), errors.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  const std::size_t n = errors.size();
  stats.median_pct =
      n % 2 ? errors[n / 2].first : (errors[n / 2 - 1].first + errors[n / 2].first) / 2;
  stats.worst_pct = errors.back().first;
  stats.worst_at = errors.back().second->row->topology + " " +
                   support::format_size(errors.back().second->row->size_bytes);
  return stats;
}

std::string format(const char* spec, double value) {
  char text[64];
  std::snprintf(text, sizeof text, spec, value);
  return text;
}

std::string short_hardware(const std::string& hardware) {
  return hardware.substr(0, hardware.find(" ("));
}

std::string measured_cell(const Measurement& m) {
  std::string cell = format("%.2f", m.measured_us);
  if (m.busbw_GBps) cell += " (busbw " + format("%.2f", *m.busbw_GBps) + ")";
  return cell;
}

std::string goal_verdict(const ErrorStats& s) {
  return std::string("median ") + (s.median_pct <= kGoalMedianPct ? "met" : "NOT met") +
         ", worst " + (s.worst_pct <= kGoalWorstPct ? "met" : "NOT met");
}

// Per system (in the order rows first name it) and overall.
void print_summary(const std::vector<Outcome>& outcomes, bool with_model) {
  std::vector<std::string> systems;
  for (const Outcome& o : outcomes)
    if (std::find(systems.begin(), systems.end(), o.row->topology) == systems.end())
      systems.push_back(o.row->topology);
  systems.push_back("all");
  std::printf(
      "\n| system | rows simulated | sim median abs err %% | sim worst abs err %% (at) | goal "
      "|%s\n",
      with_model ? " NCCL model median abs err % | NCCL model worst abs err % (at) |" : "");
  std::printf("|---|---:|---:|---|---|%s\n", with_model ? "---:|---|" : "");
  for (const std::string& system : systems) {
    std::vector<const Outcome*> group;
    for (const Outcome& o : outcomes)
      if (system == "all" || o.row->topology == system) group.push_back(&o);
    const ErrorStats sim = error_stats(group, false);
    std::string line = "| " + system + " | " + std::to_string(sim.rows) + " of " +
                       std::to_string(group.size()) + " | ";
    if (sim.rows == 0) {
      line += "- | - | - |";
    } else {
      line += format("%.1f", sim.median_pct) + " | " + format("%.1f", sim.worst_pct) + " (" +
              sim.worst_at + ") | " + goal_verdict(sim) + " |";
    }
    if (with_model) {
      const ErrorStats model = error_stats(group, true);
      line += " " + format("%.1f", model.median_pct) + " | " + format("%.1f", model.worst_pct) +
              " (" + model.worst_at + ") |";
    }
    std::printf("%s\n", line.c_str());
  }
}

void print_nccl(const std::vector<Outcome>& outcomes) {
  std::printf("## NCCL All-Gather: simulated (`nccl` baseline) vs measured\n\n");
  std::printf(
      "| source | hardware | GPUs | topology | size | measured us | simulated us | error %% "
      "| NCCL model us | model error %% | protocol |\n");
  std::printf("|---|---|---:|---|---:|---:|---:|---:|---:|---:|---|\n");
  for (const Outcome& o : outcomes) {
    const Measurement& m = *o.row;
    std::printf("| %s | %s | %d | %s | %s | %s | %.2f | %s | %.2f | %s | %s |\n",
                m.source_id.c_str(), short_hardware(m.hardware).c_str(), m.gpus, m.topology.c_str(),
                support::format_size(m.size_bytes).c_str(), measured_cell(m).c_str(), *o.sim_us,
                format("%+.1f", error_pct(*o.sim_us, m.measured_us)).c_str(), *o.model_us,
                format("%+.1f", error_pct(*o.model_us, m.measured_us)).c_str(), o.protocol.c_str());
  }
  print_summary(outcomes, true);
}

void print_msccl(const std::vector<Outcome>& outcomes) {
  std::printf("\n## MSCCL All-Gather: simulated (the row's schedule XML) vs measured\n\n");
  std::printf(
      "| source | hardware | GPUs | topology | size | measured us | schedule | simulated us "
      "| error %% | protocol |\n");
  std::printf("|---|---|---:|---|---:|---:|---|---:|---:|---|\n");
  for (const Outcome& o : outcomes) {
    const Measurement& m = *o.row;
    std::printf("| %s | %s | %d | %s | %s | %s | %s | %s | %s | %s |\n", m.source_id.c_str(),
                short_hardware(m.hardware).c_str(), m.gpus, m.topology.c_str(),
                support::format_size(m.size_bytes).c_str(), measured_cell(m).c_str(),
                m.schedule.empty() ? "-" : m.schedule.c_str(),
                o.sim_us ? format("%.2f", *o.sim_us).c_str() : o.why_not.c_str(),
                o.sim_us ? format("%+.1f", error_pct(*o.sim_us, m.measured_us)).c_str() : "-",
                o.sim_us ? o.protocol.c_str() : "-");
  }
  print_summary(outcomes, false);
}

}  // namespace

int main(int argc, char** argv) {
  std::string csv =
      std::string(OPTIFLOW_SOURCE_DIR) + "/datasets/published/nccl-tests-allgather.csv";
  std::filesystem::path external = OPTIFLOW_EXTERNAL_DIR;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--external" && i + 1 < argc) {
      external = argv[++i];
    } else if (arg == "-h" || arg == "--help") {
      std::printf("Usage: optiflow_fidelity [CSV] [--external DIR]\n");
      return 0;
    } else {
      csv = arg;
    }
  }
  try {
    const std::vector<Measurement> rows = read_measurements(csv);
    print_nccl(simulate_nccl(rows));
    print_msccl(simulate_msccl(rows, external));
    std::printf(
        "\nError = (simulated - measured) / measured. Goal (issue 9): median abs error <= "
        "%.0f %%, worst <= %.0f %%. Sizes are nccl-tests sizes (the All-Gather output per "
        "rank, binary units). A measured time given as busbw is size * (N-1)/N / busbw.\n",
        kGoalMedianPct, kGoalWorstPct);
  } catch (const support::InputError& error) {
    std::fprintf(stderr, "%s\n", error.what());
    return 1;
  }
  return 0;
}
