// libFuzzer target for the DSL. Any bytes either fail to parse with an InputError, or parse to a
// program whose canonical text parses back to the same tree and prints identically; that program
// then evaluates on a small topology within small limits, or fails with an InputError; and a
// program that evaluates compiles to a verified schedule or is rejected by a limit. Anything else
// (another exception, a round-trip mismatch, a compiler error, a sanitizer report) is a crash.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "optiflow/compiler/compiler.hpp"
#include "optiflow/compiler/evaluate.hpp"
#include "optiflow/dsl/parser.hpp"
#include "optiflow/support/error.hpp"
#include "optiflow/topology/generators.hpp"

namespace {

using namespace optiflow::support;
using namespace optiflow::topology;
namespace dsl = optiflow::dsl;
using namespace optiflow::compiler;

// Two hosts of 8 GPUs: hosts, rails, NICs, leaf switches and a spine for every statement kind.
const Topology& fuzz_topology() {
  static const Topology topology = make_a100(2);
  return topology;
}

// Plans at most this large (after pipelining) also go through the compiler's passes.
constexpr std::size_t kMaxCompiledTransfers = 1u << 13;

[[noreturn]] void crash(const std::string& what, std::string_view input,
                        const std::string& printed) {
  std::fprintf(stderr, "dsl_fuzzer: %s\n--- input ---\n%.*s\n--- printed ---\n%s--- end ---\n",
               what.c_str(), static_cast<int>(input.size()), input.data(), printed.c_str());
  std::abort();
}

void check_round_trip(const dsl::Program& program, std::string_view input, std::string& printed) {
  printed = dsl::print_program(program);
  dsl::Program reparsed;
  try {
    reparsed = dsl::parse_program(printed, "printed.ofl");
  } catch (const dsl::DslError& e) {
    crash(std::string("the printed program does not parse: ") + e.render(), input, printed);
  }
  if (!dsl::same_structure(reparsed, program)) crash("parse(print(p)) != p", input, printed);
  if (dsl::print_program(reparsed) != printed) crash("printing is not idempotent", input, printed);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  dsl::Program program;
  try {
    program = dsl::parse_program(text, "input.ofl");
  } catch (const InputError&) {
    return 0;
  }
  std::string printed;
  check_round_trip(program, text, printed);

  EvalLimits limits;
  limits.max_transfers = 1u << 14;
  limits.max_pieces = 1u << 12;
  limits.max_work = 1u << 20;
  limits.max_chunks = 1 << 12;
  Plan plan;
  try {
    plan = evaluate(program, fuzz_topology(), "input.ofl", text, limits);
  } catch (const InputError&) {
    return 0;
  }
  if (plan.transfers.size() * static_cast<std::size_t>(plan.pipeline) > kMaxCompiledTransfers)
    return 0;

  constexpr Collective kCollectives[] = {Collective::all_gather, Collective::reduce_scatter,
                                         Collective::all_reduce};
  CompileOptions options;
  options.collective = kCollectives[size % 3];
  options.limits = limits;
  try {
    (void)compile(program, fuzz_topology(), options, "input.ofl", text);
  } catch (const InputError& e) {
    // A program the evaluator accepts may still be too large as an All-Reduce (both phases
    // count), or avoid every path between two ranks it connects; anything else, and every
    // InternalError, is a compiler bug.
    const std::string message = e.what();
    if (message.find("transfers (counting") == std::string::npos &&
        message.find("reductions before it is gathered") == std::string::npos &&
        message.find("no route from rank") == std::string::npos)
      crash("compile failed: " + message, text, printed);
  }
  return 0;
}
