#include "optiflow/llm/prompts.hpp"

#include <algorithm>
#include <cstdio>
#include <string>

#include "optiflow/support/sizes.hpp"
#include "optiflow/topology/bounds.hpp"
#include "optiflow/topology/topology_summary.hpp"

namespace optiflow::llm {
namespace {

using propose::Parent;
using propose::ProposalContext;

template <typename... Args>
std::string format(const char* pattern, Args... args) {
  char buffer[512];
  std::snprintf(buffer, sizeof buffer, pattern, args...);
  return buffer;
}

std::string collective_semantics(support::Collective collective) {
  switch (collective) {
    case support::Collective::all_gather:
      return "The collective is All-Gather: rank r starts with share r (1/N of the buffer) and "
             "every rank must end with all N shares. A program describes exactly this.";
    case support::Collective::reduce_scatter:
      return "The collective is Reduce-Scatter. Write the program as an All-Gather: the compiler "
             "runs it backwards in time, each transfer reversed and reducing into the receiver, "
             "so rank r ends with share r summed over all ranks.";
    case support::Collective::all_reduce:
      return "The collective is All-Reduce. Write the program as an All-Gather: the compiler "
             "runs its mirror image as a Reduce-Scatter and then the All-Gather itself, so every "
             "rank ends with the whole buffer summed over all ranks.";
    default:
      return "The collective is " + std::string(support::to_string(collective)) +
             "; write the program as an All-Gather, which the compiler derives it from.";
  }
}

// Up to seven sizes spread over the run's sizes, always the smallest and the largest: what
// the tables show, so that prompts stay short.
std::vector<std::size_t> shown_sizes(std::size_t count) {
  std::vector<std::size_t> shown;
  if (count == 0) return shown;
  const std::size_t rows = std::min<std::size_t>(7, count);
  for (std::size_t i = 0; i < rows; ++i) {
    const std::size_t s = rows == 1 ? 0 : i * (count - 1) / (rows - 1);
    if (shown.empty() || shown.back() != s) shown.push_back(s);
  }
  return shown;
}

// Times measured on hardware (explore --hw) are marked, and so are the simulated ones beside
// them; a table of simulated times alone reads as before, so that recorded replies still replay.
// NCCL's time is simulated, so a measured time gets no speed-up over it.
std::string results_table(const ProposalContext& context, const Parent& parent) {
  const bool some_measured = std::any_of(parent.results.begin(), parent.results.end(),
                                         [](const support::SizeResult& r) { return r.measured; });
  std::string text = "| size | time us | x bound | vs NCCL |\n|---|---|---|---|\n";
  for (std::size_t s : shown_sizes(parent.results.size())) {
    const support::SizeResult& r = parent.results[s];
    const bool nccl = s < context.nccl.size() && context.nccl[s].time_us > 0 && !r.measured;
    const char* how = !some_measured ? "" : r.measured ? " (measured)" : " (simulated)";
    text += format("| %s | %.2f%s | %.3f | %s |\n", support::format_size(r.size_bytes).c_str(),
                   r.time_us, how, r.x_bound(),
                   nccl ? format("%.2fx", context.nccl[s].time_us / r.time_us).c_str() : "-");
  }
  return text;
}

std::string links_line(const char* what, const std::vector<propose::LinkNote>& links) {
  if (links.empty()) return {};
  std::string text = std::string(what) + ":";
  for (const propose::LinkNote& l : links)
    text += format(" %s->%s %.0f%%;", l.from.c_str(), l.to.c_str(), 100 * l.utilisation);
  text.back() = '\n';
  return text;
}

std::string program_block(const std::string& source) {
  std::string text = "```ofl\n" + source;
  if (!text.empty() && text.back() != '\n') text += '\n';
  return text + "```\n";
}

std::string describe_program(const ProposalContext& context, const Parent& parent) {
  std::string text = program_block(parent.source);
  if (!parent.results.empty()) {
    text += results_table(context, parent);
    text += links_line("busiest links at the largest size", parent.busiest_links);
    text += links_line("idle links", parent.idle_links);
    if (!parent.critical_path.empty()) text += "critical path " + parent.critical_path + "\n";
  } else if (!parent.diagnostics.empty()) {
    text += "It did not compile: " + parent.diagnostics + "\n";
  }
  return text;
}

std::string reply_format(int candidates) {
  return format(
      "Reply with %d different candidate programs. Put each in its own fenced block that starts "
      "with ```ofl and ends with ```, after one line saying what it tries. Nothing else is read.",
      candidates);
}

}  // namespace

std::string system_prompt(support::Collective collective, int candidates) {
  std::string text =
      "You design collective-communication algorithms for GPU clusters. You write programs in "
      "the OptiFlow DSL, which states only where data goes; a deterministic compiler orders, "
      "pipelines and routes the transfers, and a simulator times the schedule against the "
      "network's lower bound and against NCCL. Faster is better at every buffer size; a "
      "program may be good at small sizes (few rounds, low latency) or at large ones (all "
      "links busy, pipelined).\n\n";
  text += collective_semantics(collective) + "\n\n";
  text += "The DSL reference follows.\n\n<dsl-reference>\n";
  text += dsl_reference();
  text += "\n</dsl-reference>\n\n";
  text += reply_format(candidates) + "\n";
  return text;
}

std::string task_header(const ProposalContext& context) {
  const topology::Topology& topo = *context.topology;
  const topology::TopologySummary summary = topology::summarize(topo);
  std::string text =
      format("Topology %s: %d GPUs (ranks) on %d hosts, %d NICs, %d switches.\n",
             topo.name().c_str(), summary.ranks, summary.hosts, summary.nics, summary.switches);
  text += "Link classes (directed links):\n";
  for (const topology::LinkClass& c : summary.link_classes)
    text += format("- %d x %s, %.1f GB/s, %.2f us latency\n", c.count,
                   std::string(topology::to_string(c.kind)).c_str(), c.bw_GBps, c.alpha_us);
  text += "Per-GPU bandwidth:\n";
  for (const topology::GpuBandwidthGroup& g : summary.gpu_bandwidth)
    text += format("- ranks %s: %.1f GB/s in, %.1f GB/s out\n", g.ranks.c_str(), g.ingress_GBps,
                   g.egress_GBps);
  if (!summary.deviant_links.empty()) {
    // Where the faults are, so that a program can route around them or weight them.
    constexpr std::size_t kShown = 16;
    text += "Links that deviate from their class (same kind and latency):\n";
    for (std::size_t i = 0; i < summary.deviant_links.size() && i < kShown; ++i)
      text += "- " + summary.deviant_links[i].describe() + "\n";
    if (summary.deviant_links.size() > kShown)
      text += format("- (and %zu more)\n", summary.deviant_links.size() - kShown);
  }
  const auto bound = topology::LowerBound::compute(topo, context.collective);
  for (const topology::PhaseBound& phase : bound.phases())
    text +=
        format("Bottleneck cut: %d GPUs (%s) with %.1f GB/s leaving them.\n", phase.cut.gpus_inside,
               topology::describe_gpus(topo, phase.cut.inside).c_str(), phase.cut.out_bw_GBps);
  text += "\nSizes (per-rank output buffer), the lower bound and NCCL's time:\n";
  text += "| size | bound us | NCCL us | NCCL's choice |\n|---|---|---|---|\n";
  for (std::size_t s : shown_sizes(context.sizes.size())) {
    const bool nccl = s < context.nccl.size() && context.nccl[s].time_us > 0;
    text += format("| %s | %.2f | %s | %s |\n", support::format_size(context.sizes[s]).c_str(),
                   s < context.bound_us.size() ? context.bound_us[s] : 0.0,
                   nccl ? format("%.2f", context.nccl[s].time_us).c_str() : "-",
                   nccl ? context.nccl[s].choice.c_str() : "-");
  }
  return text;
}

std::string initial_prompt(const std::string& header, int candidates) {
  return header +
         format(
             "\nPropose %d programs to start from, as different from each other as you can "
             "make them (say, one for small buffers, one for large ones, one that uses the "
             "topology's structure).\n",
             candidates);
}

std::string improve_prompt(const std::string& header, const ProposalContext& context,
                           const propose::ProposalRequest& request, int candidates) {
  std::string text = header;
  text += request.parents.size() > 1 ? "\nImprove on these two programs, or combine them:\n"
                                     : "\nImprove on this program:\n";
  for (const Parent& parent : request.parents) text += "\n" + describe_program(context, parent);
  if (!request.best.empty()) {
    text += "\nThe best programs so far:\n";
    for (const Parent& best : request.best) text += "\n" + describe_program(context, best);
  }
  if (!request.failures.empty()) {
    text += "\nRecent programs that did not compile (avoid their mistakes):\n";
    for (const Parent& failure : request.failures)
      text += "\n" + describe_program(context, failure);
  }
  if (!request.known.empty()) {
    text += "\nAlready evaluated (do not propose these again, nor trivial variants):\n";
    for (const std::string& known : request.known) text += program_block(known);
  }
  text += format(
      "\nPropose %d new programs that should be faster at some sizes. Look at where the time "
      "goes: links far from busy mean the data could take more paths; a large x bound at small "
      "sizes means too many rounds.\n",
      candidates);
  return text;
}

std::string repair_prompt(const std::string& header, const propose::Rejection& rejected) {
  return header + "\nThis program was rejected:\n" + program_block(rejected.proposal.source) +
         "\nThe compiler said:\n" + rejected.diagnostics +
         "\n\nFix it. Reply with the corrected program in one fenced block that starts with "
         "```ofl and ends with ```.\n";
}

}  // namespace optiflow::llm
