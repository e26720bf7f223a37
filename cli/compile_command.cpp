// `optiflow compile PROG --topo T` and `optiflow check SCHED`.
#include <iostream>
#include <memory>

#include "commands.hpp"
#include "format.hpp"
#include "inputs.hpp"
#include "optiflow/core/compiler.hpp"
#include "optiflow/core/dsl_parser.hpp"
#include "optiflow/core/error.hpp"
#include "optiflow/core/msccl_xml.hpp"
#include "optiflow/core/schedule_io.hpp"
#include "optiflow/core/sizes.hpp"
#include "optiflow/core/topology_io.hpp"
#include "optiflow/core/verifier.hpp"

namespace optiflow::cli {
namespace {

struct CompileArgs {
  std::string program, topology, collective = "allgather", output, msccl_xml, ref_size = "1G";
  bool passes = false;
};

void run_compile(const CompileArgs& args) {
  const core::Topology topo = core::load_topology(args.topology);
  core::CompileOptions options;
  options.collective = parse_collective(args.collective);
  options.reference_size_bytes = core::parse_size(args.ref_size, "--ref-size");
  const auto result =
      core::compile_program(read_text_file(args.program), args.program, topo, options);
  const core::Schedule& s = result.schedule;
  std::cout << strprintf("compiled %s for %s on %s: %d ranks, %d chunks, %zu steps; verified\n",
                         args.program.c_str(), std::string(core::to_string(s.collective)).c_str(),
                         topo.name().c_str(), s.ranks, s.chunks, s.step_count());
  if (args.passes)
    for (const auto& pass : result.passes)
      std::cout << strprintf("  %-12s %9.3f ms %9zu transfers\n", pass.name.c_str(), pass.millis,
                             pass.transfers);
  if (!args.output.empty()) write_text_file(args.output, core::write_schedule_json(s));
  if (!args.msccl_xml.empty()) write_text_file(args.msccl_xml, core::write_msccl_xml(s));
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
  cmd->add_option("--ref-size", args->ref_size, "buffer size the scheduler orders transfers for")
      ->capture_default_str();
  cmd->add_flag("--passes", args->passes, "print each pass's time and transfer count");
  cmd->callback([args] { with_program_diagnostics([&] { run_compile(*args); }); });
}

void add_check(CLI::App& app) {
  auto* cmd =
      app.add_subcommand("check", "Verify a schedule (JSON or MSCCL XML) by symbolic execution");
  struct Args {
    std::string schedule, topology;
  };
  auto args = std::make_shared<Args>();
  cmd->add_option("SCHED", args->schedule, "schedule JSON or MSCCL XML")->required();
  cmd->add_option("--topo", args->topology, "also check routes against this topology");
  cmd->callback([args] {
    const core::Schedule s = core::read_schedule_file(args->schedule);
    std::unique_ptr<core::Topology> topo;
    if (!args->topology.empty())
      topo = std::make_unique<core::Topology>(core::load_topology(args->topology));
    const auto verdict = core::verify_schedule(s, topo.get());
    if (!verdict.ok())
      throw core::InputError(core::SourceLocation{args->schedule, 0, 0, {}},
                             "verification failed:\n" + verdict.summary());
    std::cout << strprintf(
        "%s: %s for %d ranks, %d chunks, %zu steps: verified (%zu steps executed)\n",
        args->schedule.c_str(), std::string(core::to_string(s.collective)).c_str(), s.ranks,
        s.chunks, s.step_count(), verdict.steps_executed);
  });
}

}  // namespace

void add_compile_commands(CLI::App& app) {
  add_compile(app);
  add_check(app);
}

}  // namespace optiflow::cli
