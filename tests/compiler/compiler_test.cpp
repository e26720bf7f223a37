// The compiler end to end: every example program compiles to a schedule the verifier accepts,
// for each collective, deterministically, and survives MSCCL XML export and import; the
// verifier catches a schedule with a step removed; pipeline and channels do what they say.
#include "optiflow/compiler/compiler.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "optiflow/dsl/parser.hpp"
#include "optiflow/schedule/msccl_xml.hpp"
#include "optiflow/schedule/schedule_io.hpp"
#include "optiflow/schedule/verifier.hpp"
#include "optiflow/sim/simulator.hpp"
#include "optiflow/topology/bounds.hpp"
#include "optiflow/topology/generators.hpp"

namespace optiflow::compiler {
namespace {

namespace fs = std::filesystem;

const fs::path kProgramsDir = fs::path(OPTIFLOW_SOURCE_DIR) / "datasets" / "programs";
constexpr support::Collective kCollectives[] = {support::Collective::all_gather,
                                                support::Collective::reduce_scatter,
                                                support::Collective::all_reduce};
// Generic programs must compile on every topology; these are a varied sample.
constexpr const char* kGenericTopologies[] = {"a100x4", "dgx1", "torus4x4"};

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

topology::Topology topology(const std::string& name) {
  auto built = topology::make_builtin_topology(name);
  if (!built) throw std::runtime_error("no built-in topology " + name);
  return std::move(*built);
}

// Compiles, turning errors into test failures that show the diagnostic.
Compilation compile_text(const std::string& text, const std::string& source,
                         const topology::Topology& topo,
                         support::Collective collective = support::Collective::all_gather) {
  CompileOptions options;
  options.collective = collective;
  try {
    return compile_program(text, source, topo, options);
  } catch (const dsl::DslError& e) {
    ADD_FAILURE() << e.render();
  } catch (const support::InputError& e) {
    ADD_FAILURE() << e.what();
  }
  return {};
}

void expect_verified(const schedule::Schedule& schedule, const topology::Topology& topo) {
  const schedule::VerifyResult verdict = schedule::verify_schedule(schedule, &topo);
  EXPECT_TRUE(verdict.ok()) << verdict.summary();
  EXPECT_GT(verdict.steps_executed, 0u);
}

// ---- Every example program, every collective ----------------------------------------------

struct ProgramCase {
  fs::path path;
  std::string topology;
  support::Collective collective;
};

std::vector<ProgramCase> program_cases() {
  std::vector<ProgramCase> cases;
  if (!fs::is_directory(kProgramsDir)) return cases;
  std::vector<fs::directory_entry> entries(fs::directory_iterator(kProgramsDir),
                                           fs::directory_iterator{});
  std::sort(entries.begin(), entries.end());
  for (const auto& entry : entries) {
    if (entry.is_regular_file() && entry.path().extension() == ".ofl") {
      for (const char* topo : kGenericTopologies)
        for (support::Collective c : kCollectives) cases.push_back({entry.path(), topo, c});
    } else if (entry.is_directory()) {
      // datasets/programs/<topology>/: programs written for that topology.
      std::vector<fs::path> specific;
      for (const auto& file : fs::directory_iterator(entry.path()))
        if (file.path().extension() == ".ofl") specific.push_back(file.path());
      std::sort(specific.begin(), specific.end());
      for (const auto& path : specific)
        for (support::Collective c : kCollectives)
          cases.push_back({path, entry.path().filename().string(), c});
    }
  }
  return cases;
}

std::string case_name(const testing::TestParamInfo<ProgramCase>& info) {
  std::string name = info.param.path.stem().string() + "_on_" + info.param.topology + "_" +
                     std::string(to_string(info.param.collective));
  for (char& c : name)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return name;
}

void PrintTo(const ProgramCase& c, std::ostream* out) {
  *out << c.path.filename().string() << " on " << c.topology << ", " << to_string(c.collective);
}

class CompilerPrograms : public testing::TestWithParam<ProgramCase> {};

TEST_P(CompilerPrograms, CompileVerifyAndSurviveMscclXml) {
  const ProgramCase& c = GetParam();
  const topology::Topology topo = topology(c.topology);
  const Compilation result = compile_text(read_text(c.path), c.path.string(), topo, c.collective);
  ASSERT_FALSE(HasFailure());
  const schedule::Schedule& schedule = result.schedule;
  EXPECT_EQ(schedule.collective, c.collective);
  EXPECT_EQ(schedule.ranks, topo.rank_count());
  EXPECT_EQ(schedule.topology, topo.name());
  expect_verified(schedule, topo);

  const std::string xml = schedule::write_msccl_xml(schedule);
  const schedule::Schedule imported =
      schedule::parse_msccl_xml(xml, c.path.stem().string() + ".xml");
  EXPECT_TRUE(imported == schedule) << "MSCCL XML export then import changed the schedule";
}

TEST_P(CompilerPrograms, IsDeterministic) {
  const ProgramCase& c = GetParam();
  const topology::Topology topo = topology(c.topology);
  const std::string text = read_text(c.path);
  const std::string first = schedule::write_schedule_json(
      compile_text(text, c.path.string(), topo, c.collective).schedule);
  const std::string second = schedule::write_schedule_json(
      compile_text(text, c.path.string(), topo, c.collective).schedule);
  ASSERT_FALSE(HasFailure());
  EXPECT_TRUE(first == second) << "two compilations of one program differ";
}

INSTANTIATE_TEST_SUITE_P(Examples, CompilerPrograms, testing::ValuesIn(program_cases()), case_name);

TEST(Compiler, FindsTheExamplePrograms) {
  std::set<std::string> programs;
  for (const ProgramCase& c : program_cases()) programs.insert(c.path.string());
  EXPECT_GE(programs.size(), 10u) << "under " << kProgramsDir;
}

// ---- The verifier catches a missing step --------------------------------------------------

// A receive step nothing depends on, at or after it in its block, so that removing it leaves
// every remaining reference valid: structure passes and execution shows what is missing.
struct StepAddress {
  std::size_t rank = 0, tb = 0, step = 0;
};

std::optional<StepAddress> removable_receive(const schedule::Schedule& schedule) {
  for (std::size_t r = 0; r < schedule.programs.size(); ++r) {
    const schedule::RankProgram& program = schedule.programs[r];
    for (std::size_t tb = 0; tb < program.tbs.size(); ++tb)
      for (std::size_t s = 0; s < program.tbs[tb].steps.size(); ++s) {
        if (!schedule::step_receives(program.tbs[tb].steps[s].kind)) continue;
        bool referenced = false;
        for (const schedule::ThreadBlock& other : program.tbs)
          for (const schedule::Step& step : other.steps)
            for (const schedule::StepRef& dep : step.deps)
              referenced = referenced || (static_cast<std::size_t>(dep.tb) == tb &&
                                          static_cast<std::size_t>(dep.step) >= s);
        if (!referenced) return StepAddress{r, tb, s};
      }
  }
  return std::nullopt;
}

// Whether `text` has `word` followed by a digit, as in "rank 3".
bool names_a_number_after(const std::string& text, const std::string& word) {
  for (auto at = text.find(word); at != std::string::npos; at = text.find(word, at + 1))
    if (at + word.size() < text.size() &&
        std::isdigit(static_cast<unsigned char>(text[at + word.size()])))
      return true;
  return false;
}

TEST(Compiler, VerifierRejectsAScheduleWithAStepRemoved) {
  for (const char* program : {"ring over all", "rd over all", "dbtree over all"}) {
    for (support::Collective collective : kCollectives) {
      SCOPED_TRACE(std::string(program) + " " + std::string(to_string(collective)));
      const topology::Topology topo = topology::make_ring(8);
      schedule::Schedule schedule = compile_text(program, "cut.ofl", topo, collective).schedule;
      ASSERT_TRUE(schedule::verify_schedule(schedule, &topo).ok());
      const auto victim = removable_receive(schedule);
      ASSERT_TRUE(victim);
      auto& steps = schedule.programs[victim->rank].tbs[victim->tb].steps;
      steps.erase(steps.begin() + static_cast<std::ptrdiff_t>(victim->step));

      const schedule::VerifyResult verdict = schedule::verify_schedule(schedule, &topo);
      ASSERT_FALSE(verdict.ok()) << "removing rank " << victim->rank << " tb " << victim->tb
                                 << " step " << victim->step << " went unnoticed";
      const bool named =
          std::any_of(verdict.errors.begin(), verdict.errors.end(), [](const std::string& e) {
            return names_a_number_after(e, "rank ") && names_a_number_after(e, "chunk ");
          });
      EXPECT_TRUE(named) << "no message names a rank and a chunk:\n" << verdict.summary();
    }
  }
}

// ---- pipeline and channels ---------------------------------------------------------------

TEST(Compiler, PipelineMultipliesTheChunkCount) {
  for (const char* name : {"a100x4", "torus4x4"}) {
    const topology::Topology topo = topology(name);
    for (support::Collective collective : kCollectives) {
      SCOPED_TRACE(std::string(name) + " " + std::string(to_string(collective)));
      const schedule::Schedule plain =
          compile_text("ring over all", "plain.ofl", topo, collective).schedule;
      const schedule::Schedule piped =
          compile_text("pipeline 4\nring over all", "piped.ofl", topo, collective).schedule;
      ASSERT_GT(plain.chunks, 0);
      EXPECT_EQ(piped.chunks, 4 * plain.chunks);
      expect_verified(piped, topo);
    }
  }
}

TEST(Compiler, ChannelsTwoUsesTwoChannels) {
  const topology::Topology topo = topology::make_a100(2);
  for (support::Collective collective : kCollectives) {
    SCOPED_TRACE(std::string(to_string(collective)));
    const schedule::Schedule schedule =
        compile_text("channels 2\nring over all", "channels.ofl", topo, collective).schedule;
    std::set<std::int32_t> channels;
    for (const schedule::RankProgram& program : schedule.programs)
      for (const schedule::ThreadBlock& tb : program.tbs) channels.insert(tb.channel);
    EXPECT_EQ(channels, (std::set<std::int32_t>{0, 1}));
    expect_verified(schedule, topo);
    EXPECT_NE(schedule::write_msccl_xml(schedule).find("nchannels=\"2\""), std::string::npos);
  }
}

// Without a `protocol` statement the compiler picks one per size from its cost estimate: the
// low-latency LL for small buffers, the full-bandwidth Simple for large ones; MSCCL XML keeps
// the choice.
TEST(Compiler, ChoosesTheProtocolPerSize) {
  const topology::Topology topo = topology::make_a100(1);
  const schedule::Schedule schedule =
      compile_text("ring over all", "ring.ofl", topo, support::Collective::all_gather).schedule;
  EXPECT_EQ(schedule.protocol_for(1024), "LL");
  EXPECT_EQ(schedule.protocol_for(std::uint64_t{1} << 30), "Simple");
  EXPECT_EQ(schedule.protocol, "Simple");
  ASSERT_FALSE(schedule.protocol_by_size.empty());
  for (std::size_t i = 1; i < schedule.protocol_by_size.size(); ++i)
    EXPECT_LT(schedule.protocol_by_size[i - 1].max_bytes, schedule.protocol_by_size[i].max_bytes);
  EXPECT_TRUE(schedule::parse_msccl_xml(schedule::write_msccl_xml(schedule), "ring.xml") ==
              schedule);
  // A file for a size range runs the protocol chosen for its largest size.
  schedule::MscclExportOptions small;
  small.max_bytes = 1024;
  EXPECT_NE(schedule::write_msccl_xml(schedule, small).find("proto=\"LL\""), std::string::npos);
}

// NCCL runs LL128 only over NVLink (and on the GPU generations it tests): never on a fat tree
// of NICs, nor on sm86.
TEST(Compiler, ChoosesLl128OnlyWhereNcclEnablesIt) {
  const auto uses_ll128 = [](const schedule::Schedule& s) {
    bool any = s.protocol == "LL128";
    for (const auto& range : s.protocol_by_size) any = any || range.protocol == "LL128";
    return any;
  };
  topology::Topology a100 = topology::make_a100(2);
  EXPECT_TRUE(uses_ll128(
      compile_text("ring over all", "r.ofl", a100, support::Collective::all_gather).schedule));
  a100.set_gpu_sm(86);
  EXPECT_FALSE(uses_ll128(
      compile_text("ring over all", "r.ofl", a100, support::Collective::all_gather).schedule));
  const topology::Topology fattree = *topology::make_builtin_topology("fattree8");
  EXPECT_FALSE(uses_ll128(
      compile_text("ring over all", "r.ofl", fattree, support::Collective::all_gather).schedule));
}

// Also where a pass rebuilds the plan (pipelining slices it; All-Reduce mirrors it).
TEST(Compiler, AProtocolStatementForcesOneForEverySize) {
  const topology::Topology topo = topology::make_a100(1);
  for (const char* protocol : {"LL", "LL128", "Simple"})
    for (const char* rest : {"ring over all", "pipeline 4\nring over all"})
      for (support::Collective collective : kCollectives) {
        SCOPED_TRACE(std::string(protocol) + " / " + rest + " / " +
                     std::string(to_string(collective)));
        const schedule::Schedule schedule =
            compile_text(std::string("protocol ") + protocol + "\n" + rest, "forced.ofl", topo,
                         collective)
                .schedule;
        EXPECT_EQ(schedule.protocol, protocol);
        EXPECT_TRUE(schedule.protocol_by_size.empty());
        EXPECT_NE(
            schedule::write_msccl_xml(schedule).find(std::string("proto=\"") + protocol + "\""),
            std::string::npos);
      }
}

// ---- Scale ---------------------------------------------------------------------------------

TEST(Compiler, RingOnA100x128CompilesAndVerifies) {
  const topology::Topology topo = topology::make_a100(128);
  ASSERT_EQ(topo.rank_count(), 1024);
  const auto start = std::chrono::steady_clock::now();
  const Compilation result = compile_text(read_text(kProgramsDir / "ring.ofl"), "ring.ofl", topo);
  const std::chrono::duration<double, std::milli> spent = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(HasFailure());
  // compile() verifies the schedule before returning it; the pass report says so.
  ASSERT_FALSE(result.passes.empty());
  EXPECT_EQ(result.passes.back().name, "verify");
  EXPECT_EQ(result.schedule.ranks, 1024);
  EXPECT_EQ(result.schedule.step_count(), 2u * 1024u * 1023u);
  RecordProperty("compile_ms", std::to_string(static_cast<long long>(spent.count())));
  const auto verify_start = std::chrono::steady_clock::now();
  expect_verified(result.schedule, topo);
  const std::chrono::duration<double, std::milli> verify_spent =
      std::chrono::steady_clock::now() - verify_start;
  RecordProperty("verify_ms", std::to_string(static_cast<long long>(verify_spent.count())));
  for (const PassReport& pass : result.passes)
    RecordProperty("pass_" + pass.name + "_ms",
                   std::to_string(static_cast<long long>(pass.millis)));
}

}  // namespace
}  // namespace optiflow::compiler

namespace optiflow::compiler {
namespace {

TEST(Compiler, PackCarriesEachRootsDataOverItsPackingsTrees) {
  const auto topo = topology("h100x4");
  const Compilation c = compile_text("channels 4\npipeline 8\npack over rails\ndirect over hosts\n",
                                     "pack.ofl", topo);
  expect_verified(c.schedule, topo);
  // The rails' packing is the cut bound's rate: the schedule comes within 3% of the bound.
  const auto bound = topology::LowerBound::compute(topo, support::Collective::all_gather);
  const sim::Simulator simulator(topo, c.schedule);
  for (std::uint64_t size : {std::uint64_t{64} << 20, std::uint64_t{1} << 30})
    EXPECT_LE(simulator.run(size).time_us / bound.at(size).time_us, 1.03) << size;
}

// The whole cluster's packing runs at its rate: two-deep trees, and each piece a rank forwards
// on a connection of its own (channels 1 up), so that a piece that has not arrived holds up
// no other. Both models agree within 10%.
TEST(Compiler, PackOverAllRunsNearTheBoundInBothModels) {
  const auto topo = topology("a100x4");
  const Compilation c = compile_text("pipeline 16\npack over all\n", "pack.ofl", topo);
  std::int32_t channels = 0;
  for (const auto& program : c.schedule.programs)
    for (const auto& tb : program.tbs) channels = std::max(channels, tb.channel + 1);
  EXPECT_GT(channels, 1);
  EXPECT_LE(channels, kMaxChannels);
  const auto bound = topology::LowerBound::compute(topo, support::Collective::all_gather);
  const sim::Simulator alpha_beta(topo, c.schedule);
  sim::SimOptions flow_model;
  flow_model.model = sim::Model::flow;
  const sim::Simulator flow(topo, c.schedule, flow_model);
  for (const auto& [size, limit] :
       {std::pair{std::uint64_t{64} << 20, 1.10}, std::pair{std::uint64_t{1} << 30, 1.05}}) {
    const double ab = alpha_beta.run(size).time_us;
    EXPECT_LE(ab / bound.at(size).time_us, limit) << size;
    EXPECT_NEAR(flow.run(size).time_us / ab, 1, 0.10) << size;
  }
}

TEST(Compiler, PackRespectsAvoidedLinksAndSaysWhatItCannotDo) {
  const auto topo = topology("a100x2");
  const Compilation c =
      compile_text("avoid @h0.nic0 <-> @leaf0\npack over all\n", "pack.ofl", topo);
  expect_verified(c.schedule, topo);
  const auto nic = *topo.find_node("h0.nic0"), leaf = *topo.find_node("leaf0");
  for (const auto& program : c.schedule.programs)
    for (const auto& tb : program.tbs)
      for (const auto& step : tb.steps)
        for (topology::LinkId l : step.route) {
          const auto& link = topo.link(l);
          EXPECT_FALSE((link.src == nic && link.dst == leaf) ||
                       (link.src == leaf && link.dst == nic));
        }
  auto error_of = [&](const std::string& text) {
    try {
      compile_program(text, "p.ofl", topo, {});
    } catch (const dsl::DslError& e) {
      return e.render();
    }
    return std::string("compiled");
  };
  EXPECT_NE(error_of("pack over all reverse\n").find("p.ofl:1:1: error: pack has no direction"),
            std::string::npos);
  EXPECT_NE(error_of("avoid @h0.gpu0 <-> @h0.nvswitch, @h0.gpu0 <-> @h0.nic0\npack over all\n")
                .find("cannot reach"),
            std::string::npos)
      << error_of("avoid @h0.gpu0 <-> @h0.nvswitch, @h0.gpu0 <-> @h0.nic0\npack over all\n");
}

}  // namespace
}  // namespace optiflow::compiler
