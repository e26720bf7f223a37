// End-to-end: `optiflow explore --proposer llm|hybrid` against a chat-completions server in
// this process (real HTTP), through every fault the model loop must survive; then the run
// replayed from the store alone, byte for byte; and `optiflow history` on its calls.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "../llm/fake_chat_server.hpp"
#include "e2e_support.hpp"
#include "optiflow/db/store.hpp"

namespace {

namespace fs = std::filesystem;
using optiflow::e2e::slurp;
using optiflow::testing::FakeChatServer;
using optiflow::testing::reply_with;
using optiflow::testing::ScriptedReply;

constexpr const char* kKey = "sk-e2e-SECRET-77";

// Valid All-Gather programs for 8 GPUs on one NVSwitch host, two per reply, chosen by the
// request's seed so that replies differ.
std::string programs_for(std::uint64_t seed) {
  static const char* kPrograms[] = {
      "ring over all",
      "pipeline 4\nring over all",
      "direct over all",
      "bruck over all",
      "channels 2\nring over all reverse",
      "binomial over all",
      "pipeline 8\nsplit 2 as r {\n  ring over all by (rank * 3) % nranks\n}",
      "split {\n  weight 3 { ring over all }\n  weight 1 { direct over all }\n}"};
  const std::size_t a = seed % 8, b = (seed / 8 + 1 + a) % 8;
  return std::string("Two ideas.\n```ofl\n") + kPrograms[a] + "\n```\n```ofl\n" + kPrograms[b] +
         "\n```\n";
}

ScriptedReply answer(const nlohmann::json& request) {
  const std::string prompt = request["messages"][1]["content"];
  if (prompt.find("This program was rejected") != std::string::npos)
    return reply_with("Fixed:\n```ofl\nchain over all\n```\n");
  return reply_with(programs_for(request.value("seed", std::uint64_t{0})));
}

// Every fault, in the order the server meets requests.
std::vector<ScriptedReply> faults() {
  ScriptedReply error;
  error.status = 500;
  error.body = "{\"error\": \"overloaded\"}";
  ScriptedReply limited;
  limited.status = 429;
  limited.headers = {{"Retry-After", "1"}};
  ScriptedReply hang = reply_with("```ofl\nring over all\n```");
  hang.delay_s = 5;
  ScriptedReply not_json;
  not_json.body = "<html>502 bad gateway</html>";
  ScriptedReply cut = reply_with("```ofl\nbruck over all\n```\n```ofl\nsplit 2 as r {\n  ring ov");
  cut.finish_reason = "length";
  return {error, limited, hang, hang, hang, not_json,
          reply_with("I would use a ring, it is the classic answer."), cut,
          reply_with("```ofl\nrd over al\n```"),  // does not compile: repaired once
          // Past the evaluator's limits: rejected before its memory is spent.
          reply_with("```ofl\npipeline 64\nsplit 1024 as a {\n  split 1024 as b { ring over all "
                     "}\n}\n```")};
}

class LlmExplore : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("optiflow-llm-e2e-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    server_.set_fallback(answer);
  }
  void TearDown() override { fs::remove_all(dir_); }

  int run(const std::string& env, const std::string& args, std::string* out = nullptr) const {
    return optiflow::e2e::run_optiflow(dir_, args, out, env);
  }
  std::string env(const std::string& url) const {
    return "OPTIFLOW_LLM_URL='" + url + "' OPTIFLOW_LLM_MODEL=test-model OPTIFLOW_LLM_KEY=" + kKey +
           " OPTIFLOW_LLM_TIMEOUT=1";
  }
  std::string explore_args(const std::string& proposer, const std::string& out_dir, int retries = 2,
                           int concurrency = 2) const {
    return "explore --topo a100x1 --sizes 1K:1M --budget 48 --seed 3 --threads 2 --proposer " +
           proposer + " --llm-retries " + std::to_string(retries) + " --llm-concurrency " +
           std::to_string(concurrency) + " --db '" + (dir_ / "a.db").string() + "' --out '" +
           (dir_ / out_dir).string() + "'";
  }
  std::string history(const std::string& what, std::string* out) const {
    run("", "history --db '" + (dir_ / "a.db").string() + "' " + what, out);
    return *out;
  }

  FakeChatServer server_;
  fs::path dir_;
};

TEST_F(LlmExplore, CompletesThroughEveryFaultAndReplaysByteForByte) {
  server_.script(faults());
  std::string out;
  // One request at a time, so that the faults meet the calls in a known order: the first call
  // fails (500, 429, a hang), the second too (a hang, a hang, not JSON), the third succeeds.
  ASSERT_EQ(run(env(server_.url()), explore_args("llm", "live", 2, 1), &out), 0)
      << out << slurp(dir_ / "err");
  EXPECT_NE(out.find("explore allgather on a100x1: 48 candidates"), std::string::npos) << out;
  EXPECT_NE(out.find("model calls:"), std::string::npos) << out;

  const auto store = optiflow::db::Store::open((dir_ / "a.db").string());
  const auto calls = store.model_calls(1);
  ASSERT_GE(calls.size(), 10u);
  int failed = 0, repairs = 0;
  for (const auto& c : calls) {
    failed += c.error.empty() ? 0 : 1;
    repairs += c.purpose == "repair" ? 1 : 0;
    EXPECT_EQ(c.model, "test-model");
  }
  EXPECT_GE(failed, 2) << "a hang past the timeout and a body that is not JSON";
  EXPECT_GE(repairs, 1);
  // A live run samples every call: none is answered from the store, and no two calls of the
  // run are the same request (each carries its own seed).
  std::set<std::string> hashes;
  for (const auto& c : calls) {
    EXPECT_FALSE(c.cached);
    hashes.insert(c.request_hash);
  }
  EXPECT_EQ(hashes.size(), calls.size());
  EXPECT_EQ(store.run(1)->status, "finished");
  // The winner at 1M was proposed by a model call, which the store names.
  const auto best = store.best({});
  ASSERT_FALSE(best.empty());
  const auto proposed_by = store.model_calls_of_program(best.back().program_id);
  ASSERT_FALSE(proposed_by.empty());
  EXPECT_EQ(store.program(best.back().program_id)->origin, "llm");
  EXPECT_EQ(slurp(dir_ / "a.db").find(kKey), std::string::npos);
  EXPECT_EQ(slurp(dir_ / "a.db-wal").find(kKey), std::string::npos);
  EXPECT_EQ((slurp(dir_ / "out") + slurp(dir_ / "err")).find(kKey), std::string::npos);

  // The replay: no server at all, every reply from the store.
  const int calls_before = server_.calls();
  ASSERT_EQ(run(env("http://127.0.0.1:1/v1"),
                explore_args("llm", "replay", 2, 1) + " --replay-only", &out),
            0)
      << out << slurp(dir_ / "err");
  EXPECT_EQ(server_.calls(), calls_before);
  std::size_t compared = 0;
  for (const auto& file : fs::directory_iterator(dir_ / "live")) {
    EXPECT_EQ(slurp(file.path()), slurp(dir_ / "replay" / file.path().filename()))
        << file.path().filename();
    ++compared;
  }
  EXPECT_EQ(compared, 2 * 11u);  // schedule JSON and MSCCL XML at each of 11 sizes
  // The replay made the same calls, failures included, and stored the same candidates.
  const auto replayed_calls = store.model_calls(2);
  ASSERT_EQ(replayed_calls.size(), calls.size());
  for (std::size_t i = 0; i < calls.size(); ++i) {
    EXPECT_EQ(replayed_calls[i].request_hash, calls[i].request_hash) << i;
    EXPECT_EQ(replayed_calls[i].error, calls[i].error) << i;
  }
  const auto live_candidates = store.candidates(1), replayed = store.candidates(2);
  ASSERT_EQ(replayed.size(), live_candidates.size());
  for (std::size_t i = 0; i < replayed.size(); ++i) {
    EXPECT_EQ(replayed[i].program_source, live_candidates[i].program_source) << i;
    EXPECT_EQ(replayed[i].schedule_hash, live_candidates[i].schedule_hash) << i;
  }

  history("runs", &out);
  EXPECT_NE(out.find("calls/tokens/cost"), std::string::npos) << out;
  history("calls 1", &out);
  EXPECT_NE(out.find("repair"), std::string::npos) << out;
  EXPECT_NE(out.find("timed out"), std::string::npos) << out;
  history("calls 2", &out);
  EXPECT_NE(out.find("from the replay cache"), std::string::npos) << out;
  history("program " + std::to_string(best.back().program_id), &out);
  EXPECT_NE(out.find("proposed by model call"), std::string::npos) << out;
}

TEST_F(LlmExplore, ReplayOnlyFailsClearlyOnARequestNeverRecorded) {
  std::string out;
  ASSERT_NE(run(env("http://127.0.0.1:1/v1"), explore_args("llm", "o") + " --replay-only", &out),
            0);
  EXPECT_NE(slurp(dir_ / "err").find("replaying only: the store has no recorded reply"),
            std::string::npos)
      << slurp(dir_ / "err");
  EXPECT_EQ(server_.calls(), 0);
}

TEST_F(LlmExplore, ADeadServerEndsTheRunAndKeepsWhatItStored) {
  std::string out;
  ASSERT_NE(run(env("http://127.0.0.1:1/v1"), explore_args("hybrid", "o", 0), &out), 0);
  const std::string err = slurp(dir_ / "err");
  EXPECT_NE(err.find("the run failed"), std::string::npos) << err;
  EXPECT_NE(err.find("failed 3 calls in a row"), std::string::npos) << err;
  EXPECT_EQ(err.find(kKey), std::string::npos);
  const auto store = optiflow::db::Store::open((dir_ / "a.db").string());
  EXPECT_EQ(store.run(1)->status, "failed");
  EXPECT_GT(store.run_stats(1).candidates, 0) << "the offline proposer's candidates are kept";
  history("runs", &out);
  EXPECT_NE(out.find("failed"), std::string::npos);
}

TEST_F(LlmExplore, HybridRecordsEachCandidatesOriginAndStopsAtTheTokenBudget) {
  std::string out;
  ASSERT_EQ(
      run(env(server_.url()), explore_args("hybrid", "o") + " --llm-max-total-tokens 20000", &out),
      0)
      << out << slurp(dir_ / "err");
  const auto store = optiflow::db::Store::open((dir_ / "a.db").string());
  const auto rows = store.results({});
  bool llm = false, offline = false;
  for (const auto& r : rows) {
    llm |= r.origin == "llm";
    offline |= r.origin == "offline";
  }
  EXPECT_TRUE(llm);
  EXPECT_TRUE(offline);
  const auto totals = store.model_call_totals(1);
  EXPECT_GE(totals.prompt_tokens + totals.completion_tokens, 20000);
  // Each round of calls checks the budget first, so it overshoots by at most one round.
  EXPECT_LT(totals.prompt_tokens + totals.completion_tokens, 20000 + 8 * 5000);
}

}  // namespace
