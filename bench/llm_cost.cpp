// Not a Google Benchmark: what an exploration with the language-model proposer costs in calls
// and tokens (docs/llm.md). It runs `explore --proposer llm` on a topology against the scripted
// chat server of the tests (real HTTP, in this process), whose replies hold four valid programs
// each, chosen by the request's seed, and whose token counts are characters / 4. Prompt tokens
// are therefore what OptiFlow's own prompts weigh (about 4 characters a token, as English text
// and code run with common tokenizers); completion tokens depend on the model and are shown
// for these short replies only.
// Usage: optiflow_bench_llm_cost [BUDGET [TOPOLOGY...]]   (default 200 on a100x4 and dgx1)
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "../tests/llm/fake_chat_server.hpp"
#include "optiflow/db/store.hpp"
#include "optiflow/explore/explore.hpp"
#include "optiflow/llm/llm_proposer.hpp"
#include "optiflow/llm/prompts.hpp"

namespace {

using namespace optiflow;

// Programs that compile on every built-in topology with hosts and rails.
const char* const kPrograms[] = {
    "ring over all",
    "pipeline 8\nring over all",
    "split nlocal as r {\n  ring over all by (host, (local - r) % nlocal)\n}",
    "rd over rails\ndirect over hosts",
    "pipeline 16\nring over rails\ndirect over hosts",
    "bruck over all",
    "channels 2\npipeline 4\nbruck over rails\ndirect over hosts",
    "split {\n  weight 3 { ring over all }\n  weight 1 { ring over all reverse }\n}",
};

testing::ScriptedReply answer(const nlohmann::json& request) {
  const std::uint64_t seed = request.value("seed", std::uint64_t{0});
  std::string reply = "Four ideas.\n";
  for (std::uint64_t k = 0; k < 4; ++k)
    reply += std::string("One more:\n```ofl\n") + kPrograms[(seed + 3 * k) % 8] + "\n```\n";
  return testing::reply_with(reply);
}

}  // namespace

int main(int argc, char** argv) {
  const std::int64_t budget = argc > 1 ? std::stoll(argv[1]) : 200;
  std::vector<std::string> topologies(argv + std::min(argc, 2), argv + argc);
  if (topologies.empty()) topologies = {"a100x4", "dgx1"};
  const auto dir = std::filesystem::temp_directory_path() / "optiflow-bench-llm-cost";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);

  testing::FakeChatServer server;
  server.set_fallback(answer);
  std::printf("system prompt: %zu characters (DSL reference %zu)\n\n",
              llm::system_prompt(support::Collective::all_gather, 4).size(),
              llm::dsl_reference().size());
  std::printf("%-10s %7s %6s %8s %14s %14s %12s %12s\n", "topology", "budget", "calls", "repairs",
              "prompt tokens", "reply tokens", "per call", "per cand.");
  for (const std::string& name : topologies) {
    explore::ExploreOptions options;
    options.topology = name;
    options.budget = budget;
    options.proposer = "llm";
    options.db_path = (dir / (name + ".db")).string();
    options.out_dir = (dir / name).string();
    llm::LlmSettings settings;
    settings.server.url = server.url();
    settings.models = {{"bench-model", 1, 0, 0}};
    const auto result =
        explore::explore(options, [&](const std::string&, const propose::ProposalContext& context) {
          return llm::make_llm_proposer(context, settings, options.db_path);
        });
    const db::Store store = db::Store::open(options.db_path);
    const db::ModelCallTotals t = store.model_call_totals(result.run_id);
    std::int64_t repairs = 0;
    for (const db::ModelCall& c : store.model_calls(result.run_id))
      repairs += c.purpose == "repair" ? 1 : 0;
    std::printf("%-10s %7lld %6lld %8lld %14lld %14lld %12.0f %12.0f\n", name.c_str(),
                static_cast<long long>(result.candidates), static_cast<long long>(t.calls),
                static_cast<long long>(repairs), static_cast<long long>(t.prompt_tokens),
                static_cast<long long>(t.completion_tokens),
                static_cast<double>(t.prompt_tokens) / static_cast<double>(t.calls),
                static_cast<double>(t.prompt_tokens + t.completion_tokens) /
                    static_cast<double>(result.candidates));
  }
  std::filesystem::remove_all(dir);
  return 0;
}
