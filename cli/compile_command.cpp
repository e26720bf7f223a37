// `optiflow compile PROG --topo T` and `optiflow check SCHED`.
#include <iostream>
#include <memory>

#include "commands.hpp"
#include "format.hpp"
#include "inputs.hpp"
#include "optiflow/compiler/compiler.hpp"
#include "optiflow/dsl/parser.hpp"
#include "optiflow/schedule/msccl_xml.hpp"
#include "optiflow/schedule/mscclpp_plan.hpp"
#include "optiflow/schedule/schedule_io.hpp"
#include "optiflow/schedule/verifier.hpp"
#include "optiflow/support/error.hpp"
#include "optiflow/support/sizes.hpp"
#include "optiflow/topology/topology_io.hpp"

namespace optiflow::cli {
namespace {

struct CompileArgs {
  std::string program, topology, collective = "allgather", output, msccl_xml, ref_size = "1G";
  std::string mscclpp_plan;
  bool passes = false;
};

void run_compile(const CompileArgs& args) {
  const topology::Topology topo = topology::load_topology(args.topology);
  compiler::CompileOptions options;
  options.collective = parse_collective(args.collective);
  options.reference_size_bytes = support::parse_size(args.ref_size, "ref_size");
  const auto result =
      compiler::compile_program(read_text_file(args.program), args.program, topo, options);
  const schedule::Schedule& s = result.schedule;
  std::cout << strprintf("compiled %s for %s on %s: %d ranks, %d chunks, %zu steps; verified\n",
                         args.program.c_str(),
                         std::string(support::to_string(s.collective)).c_str(), topo.name().c_str(),
                         s.ranks, s.chunks, s.step_count());
  if (args.passes)
    for (const auto& pass : result.passes)
      std::cout << strprintf("  %-12s %9.3f ms %9zu transfers\n", pass.name.c_str(), pass.millis,
                             pass.transfers);
  if (!args.output.empty()) write_text_file(args.output, schedule::write_schedule_json(s));
  if (!args.msccl_xml.empty()) write_text_file(args.msccl_xml, schedule::write_msccl_xml(s));
  if (!args.mscclpp_plan.empty())
    write_text_file(args.mscclpp_plan, schedule::write_mscclpp_plan(s));
}

void add_compile(CLI::App& app) {
  auto* cmd = app.add_subcommand("compile", "Compile a DSL program into a verified schedule");
  auto args = std::make_shared<CompileArgs>();
  cmd->add_option("PROG", args->program, "DSL program (docs/dsl.md)")->required();
  cmd->add_option("--topo", args->topology, "built-in name or topology JSON file")->required();
  cmd->add_option("--collective", args->collective, "allgather | reducescatter | allreduce")
      ->capture_default_str();
  cmd->add_option("-o,--output", args->output, "write the schedule JSON here");
  cmd->add_option("--msccl-xml", args->msccl_xml, "write MSCCL XML here");
  cmd->add_option("--mscclpp-json,--mscclpp-plan", args->mscclpp_plan,
                  "write the MSCCL++ execution plan JSON here");
  cmd->add_option("--ref-size", args->ref_size, "buffer size the scheduler orders transfers for")
      ->capture_default_str();
  cmd->add_flag("--passes", args->passes, "print each pass's time and transfer count");
  cmd->callback([args] { with_program_diagnostics([&] { run_compile(*args); }); });
}

void add_check(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "check",
      "Verify a schedule (JSON or MSCCL XML) for every execution order: races, deadlock, result");
  struct Args {
    std::string schedule, topology;
  };
  auto args = std::make_shared<Args>();
  cmd->add_option("SCHED", args->schedule, "schedule JSON or MSCCL XML")->required();
  cmd->add_option("--topo", args->topology, "also check routes against this topology");
  cmd->callback([args] {
    const schedule::Schedule s = schedule::read_schedule_file(args->schedule);
    std::unique_ptr<topology::Topology> topo;
    if (!args->topology.empty())
      topo = std::make_unique<topology::Topology>(topology::load_topology(args->topology));
    const auto verdict = schedule::verify_schedule(s, topo.get());
    if (!verdict.ok())
      throw support::InputError(support::SourceLocation{args->schedule, 0, 0, {}},
                                "verification failed:\n" + verdict.summary());
    std::cout << strprintf(
        "%s: %s for %d ranks, %d chunks, %zu steps: verified (%zu steps executed)\n",
        args->schedule.c_str(), std::string(support::to_string(s.collective)).c_str(), s.ranks,
        s.chunks, s.step_count(), verdict.steps_executed);
  });
}

}  // namespace

void add_compile_commands(CLI::App& app) {
  add_compile(app);
  add_check(app);
}

}  // namespace optiflow::cli
