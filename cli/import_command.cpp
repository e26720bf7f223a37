// `optiflow import teccl SCHEDULE.json --input INPUT.json`: TE-CCL schedules into the IR.
#include <iostream>
#include <memory>

#include "commands.hpp"
#include "format.hpp"
#include "inputs.hpp"
#include "optiflow/schedule/msccl_xml.hpp"
#include "optiflow/schedule/schedule_io.hpp"
#include "optiflow/schedule/teccl_import.hpp"
#include "optiflow/schedule/verifier.hpp"
#include "optiflow/support/error.hpp"
#include "optiflow/topology/topology_io.hpp"

namespace optiflow::cli {
namespace {

struct TecclArgs {
  std::string schedule, input, output, msccl_xml, topo_out;
};

void run_teccl(const TecclArgs& args) {
  const schedule::TecclImport imported = schedule::import_teccl(args.schedule, args.input);
  const schedule::Schedule& s = imported.schedule;
  // Nothing is written unless the schedule is proven correct on the topology it came with, so
  // a file this command wrote can go straight to `sim`.
  const auto verdict = schedule::verify_schedule(s, &imported.topology);
  if (!verdict.ok())
    throw support::InputError(support::SourceLocation{args.schedule, 0, 0, {}},
                              "imported schedule does not verify:\n" + verdict.summary());
  std::cout << strprintf("imported %s on %s: %d ranks, %d chunks, %zu steps; verified\n",
                         args.schedule.c_str(), imported.topology.name().c_str(), s.ranks, s.chunks,
                         s.step_count());
  for (const std::string& note : imported.notes) std::cout << "  note: " << note << "\n";
  if (!args.output.empty()) write_text_file(args.output, schedule::write_schedule_json(s));
  if (!args.msccl_xml.empty()) write_text_file(args.msccl_xml, schedule::write_msccl_xml(s));
  if (!args.topo_out.empty())
    write_text_file(args.topo_out, topology::write_topology_json(imported.topology));
}

void add_teccl(CLI::App& parent) {
  auto* cmd = parent.add_subcommand(
      "teccl", "Import a TE-CCL All-Gather schedule and its topology (docs/teccl-import.md)");
  auto args = std::make_shared<TecclArgs>();
  cmd->add_option("SCHEDULE", args->schedule, "TE-CCL schedule output JSON")->required();
  cmd->add_option("--input", args->input, "the TE-CCL input JSON it was solved from")->required();
  cmd->add_option("-o,--output", args->output, "write the schedule JSON here");
  cmd->add_option("--msccl-xml", args->msccl_xml, "write MSCCL XML here");
  cmd->add_option("--topo-out", args->topo_out, "write the topology JSON here");
  cmd->callback([args] { run_teccl(*args); });
}

}  // namespace

void add_import_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("import", "Import schedules written by other tools");
  cmd->require_subcommand(1);
  add_teccl(*cmd);
}

}  // namespace optiflow::cli
