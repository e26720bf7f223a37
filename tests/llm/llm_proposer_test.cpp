// The language-model proposer against a chat server over real HTTP, with a real store: what it
// asks, what it makes of the replies, the replay cache, budgets, faults and the key.
#include "optiflow/llm/llm_proposer.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <sstream>

#include "../db/temp_db.hpp"
#include "fake_chat_server.hpp"
#include "optiflow/db/store.hpp"
#include "optiflow/llm/prompts.hpp"
#include "optiflow/topology/bounds.hpp"
#include "optiflow/topology/generators.hpp"

namespace optiflow::llm {
namespace {

using propose::Proposal;
using propose::ProposalRequest;
using testing::FakeChatServer;
using testing::reply_with;
using testing::ScriptedReply;

constexpr const char* kKey = "sk-test-SECRET-123";
const std::string kTwoPrograms =
    "Two:\n```ofl\nring over all\n```\n```ofl\npipeline 4\nring over all reverse\n```\n";

std::string file_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

class LlmProposerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    topology_ = *topology::make_builtin_topology("a100x1");
    db::Store store = db::Store::open(db_.path());
    db::RunInfo run;
    run.topology_id = store.put_topology("a100x1", "{}");
    run.collective = "allgather";
    run.proposer = "llm";
    run_ = store.begin_run(run);
    context_.topology = &topology_;
    context_.sizes = {1024, 1 << 20};
    const auto bound = topology::LowerBound::compute(topology_, context_.collective);
    for (auto size : context_.sizes) context_.bound_us.push_back(bound.at(size).time_us);
    context_.nccl = {{12.5, "ring/LL"}, {40.0, "ring/LL128"}};
    context_.run_id = run_;
    context_.seed = 7;
    settings_.server.url = server_.url();
    settings_.server.key = kKey;
    settings_.server.retries = 1;
    settings_.server.backoff_s = 0.01;
    settings_.models = {{"fast", 1, 1.0, 2.0}};
    settings_.concurrency = 2;
    settings_.candidates_per_call = 2;
  }

  // Another run in the same store: later calls go to it.
  db::Id new_run() {
    db::Store store = db::Store::open(db_.path());
    db::RunInfo run;
    run.topology_id = store.put_topology("a100x1", "{}");
    run.collective = "allgather";
    run.proposer = "llm";
    context_.run_id = store.begin_run(run);
    return context_.run_id;
  }

  std::unique_ptr<propose::Proposer> proposer() const {
    return make_llm_proposer(context_, settings_, db_.path());
  }
  /// The calls of the run the next proposer records into.
  std::vector<db::ModelCall> calls() const {
    return db::Store::open(db_.path()).model_calls(context_.run_id);
  }

  static ProposalRequest request(std::uint64_t seed) {
    ProposalRequest r;
    r.seed = seed;
    r.parents = {propose::Parent{"ring over all\n",
                                 {{.size_bytes = 1024, .time_us = 20, .bound_us = 20 / 1.5},
                                  {.size_bytes = 1 << 20, .time_us = 60, .bound_us = 50}},
                                 {},
                                 {{"h0.gpu0", "sw0", 0.98}},
                                 {{"h0.gpu3", "sw0", 0.01}},
                                 "at 1K: 7 steps through ranks 0 1 2 3 4 5 6 7"}};
    r.failures = {
        propose::Parent{"rd over all\n", {}, "prog:1:1: error: power of two", {}, {}, {}}};
    r.known = {"bruck over all\n"};
    return r;
  }

  db::test_support::TempDb db_;
  FakeChatServer server_;
  topology::Topology topology_;
  propose::ProposalContext context_;
  LlmSettings settings_;
  db::Id run_ = 0;
};

TEST_F(LlmProposerTest, EachReplyBecomesItsProgramsWithTheCallThatProposedThem) {
  server_.set_fallback([](const nlohmann::json&) { return reply_with(kTwoPrograms); });
  auto p = proposer();
  const std::vector<ProposalRequest> requests{request(1), request(2), request(3)};
  const auto proposals = p->propose(requests);
  ASSERT_EQ(proposals.size(), 3u);
  const auto recorded = calls();
  ASSERT_EQ(recorded.size(), 3u);
  for (std::size_t i = 0; i < 3; ++i) {
    ASSERT_EQ(proposals[i].size(), 2u);
    EXPECT_EQ(proposals[i][0].source, "ring over all\n");
    EXPECT_EQ(proposals[i][1].source, "pipeline 4\nring over all reverse\n");
    EXPECT_EQ(proposals[i][0].origin, "llm");
    EXPECT_EQ(proposals[i][0].model_call_id, recorded[i].id);  // calls recorded in request order
    EXPECT_EQ(recorded[i].purpose, "propose");
    EXPECT_EQ(recorded[i].model, "fast");
    EXPECT_FALSE(recorded[i].cached);
    EXPECT_GT(recorded[i].prompt_tokens, 100);
    EXPECT_NEAR(recorded[i].cost,
                (recorded[i].prompt_tokens * 1.0 + recorded[i].completion_tokens * 2.0) / 1e6,
                1e-12);
    EXPECT_EQ(recorded[i].response, kTwoPrograms);
  }
  EXPECT_EQ(p->proposals_per_request(), 2u);
}

TEST_F(LlmProposerTest, ThePromptCarriesTheTaskAndTheRequestsSeed) {
  server_.set_fallback([](const nlohmann::json&) { return reply_with(kTwoPrograms); });
  proposer()->propose(std::vector<ProposalRequest>{request(5)});
  const nlohmann::json body = server_.requests().at(0);
  EXPECT_EQ(body["model"], "fast");
  EXPECT_EQ(body["seed"], call_seed(5, 0));  // the request's seed, as the run's first call
  ASSERT_EQ(body["messages"].size(), 2u);
  const std::string system = body["messages"][0]["content"];
  const std::string user = body["messages"][1]["content"];
  EXPECT_NE(system.find("## Grammar (EBNF)"), std::string::npos);  // docs/dsl.md, built in
  EXPECT_NE(system.find("All-Gather"), std::string::npos);
  EXPECT_NE(system.find("```ofl"), std::string::npos);
  for (const char* expected : {"Topology a100x1: 8 GPUs", "Bottleneck cut", "ring/LL128", "| 1M |",
                               "ring over all", "h0.gpu0->sw0 98%", "7 steps through ranks 0 1",
                               "power of two", "Already evaluated", "bruck over all"})
    EXPECT_NE(user.find(expected), std::string::npos) << expected << " in\n" << user;
  // Nothing in a prompt changes from run to run: the same request is the same text.
  EXPECT_EQ(improve_prompt(task_header(context_), context_, request(5), 2),
            improve_prompt(task_header(context_), context_, request(5), 2));
}

// The model is told where a fault is, not only that some link is slow.
TEST_F(LlmProposerTest, ThePromptNamesTheLinksThatDeviateFromTheirClass) {
  EXPECT_EQ(task_header(context_).find("deviate"), std::string::npos);  // a healthy node
  const topology::Topology degraded = *topology::make_builtin_topology("a100x4-degraded");
  propose::ProposalContext context = context_;
  context.topology = &degraded;
  EXPECT_NE(task_header(context).find("Links that deviate from their class (same kind and "
                                      "latency):\n- h1.nic3 <-> leaf3 (ib, rank 11): 6.25 GB/s, "
                                      "0.25 of its class's 25 GB/s\n"),
            std::string::npos)
      << task_header(context);
}

TEST_F(LlmProposerTest, MeasuredTimesAreMarkedAndSimulatedOnesAloneReadAsBefore) {
  const std::string header = task_header(context_);
  ProposalRequest r = request(5);
  const std::string simulated = improve_prompt(header, context_, r, 2);
  EXPECT_EQ(simulated.find("(simulated)"), std::string::npos) << simulated;
  EXPECT_NE(simulated.find("| 1K | 20.00 | 1.500 | 0.62x |"), std::string::npos) << simulated;
  r.parents[0].results[1].measured = true;  // explore --hw measured it at 1M
  const std::string measured = improve_prompt(header, context_, r, 2);
  EXPECT_NE(measured.find("| 1K | 20.00 (simulated) | 1.500 | 0.62x |"), std::string::npos)
      << measured;
  // NCCL's time is simulated: no speed-up over it for a measured time.
  EXPECT_NE(measured.find("| 1M | 60.00 (measured) | 1.200 | - |"), std::string::npos) << measured;
}

// A server whose reply names the seed it was sent, so that two samples can be told apart.
ScriptedReply echo_seed(const nlohmann::json& request) {
  return reply_with("```ofl\n# seed " + std::to_string(request.value("seed", std::uint64_t{0})) +
                    "\nring over all\n```\n");
}

// In a live run every call is a new sample: the same prompt asked twice is sent twice, each
// with a seed of its own, and gets two replies.
TEST_F(LlmProposerTest, ALiveRunSamplesARepeatedPromptAgain) {
  server_.set_fallback(echo_seed);
  auto p = proposer();
  const auto first = p->propose(std::vector<ProposalRequest>{request(9)});
  const auto second = p->propose(std::vector<ProposalRequest>{request(9)});
  EXPECT_EQ(server_.calls(), 2);
  EXPECT_EQ(server_.requests()[0]["seed"], call_seed(9, 0));
  EXPECT_EQ(server_.requests()[1]["seed"], call_seed(9, 1));
  EXPECT_NE(call_seed(9, 0), call_seed(9, 1));
  EXPECT_NE(first[0][0].source, second[0][0].source);
  const auto recorded = calls();
  ASSERT_EQ(recorded.size(), 2u);
  EXPECT_NE(recorded[0].request_hash, recorded[1].request_hash);
  EXPECT_FALSE(recorded[1].cached);
}

// A resumed run answers the calls it made before from its own record, in order, without
// calling or recording them again; then it calls the server.
TEST_F(LlmProposerTest, AResumedRunIsAnsweredFromItsOwnCallsInOrder) {
  server_.set_fallback(echo_seed);
  std::vector<std::string> live;
  {
    auto p = proposer();
    for (int i = 0; i < 2; ++i)
      live.push_back(p->propose(std::vector<ProposalRequest>{request(9)})[0][0].source);
  }
  auto resumed = proposer();
  for (int i = 0; i < 2; ++i)
    EXPECT_EQ(resumed->propose(std::vector<ProposalRequest>{request(9)})[0][0].source, live[i]);
  EXPECT_EQ(server_.calls(), 2);
  EXPECT_EQ(calls().size(), 2u);
  resumed->propose(std::vector<ProposalRequest>{request(9)});  // past what it made: live
  EXPECT_EQ(server_.calls(), 3);
  EXPECT_EQ(calls().size(), 3u);
  // A resumed run that asks something else at a recorded call has changed: it says so.
  auto changed = proposer();
  EXPECT_THROW(changed->propose(std::vector<ProposalRequest>{request(10)}), propose::ProposerError);
}

// With the cache asked for, another run's call with the same prompt, seed and number is
// answered from the store, for free.
TEST_F(LlmProposerTest, TheCacheAnswersTheSameCallOfAnotherRun) {
  server_.set_fallback(echo_seed);
  const auto first = proposer()->propose(std::vector<ProposalRequest>{request(9)});
  new_run();
  settings_.use_cache = true;
  const auto again = proposer()->propose(std::vector<ProposalRequest>{request(9)});
  EXPECT_EQ(server_.calls(), 1);
  EXPECT_EQ(again[0][0].source, first[0][0].source);
  EXPECT_TRUE(calls().back().cached);
  const db::ModelCallTotals totals = db::Store::open(db_.path()).model_call_totals(context_.run_id);
  EXPECT_EQ(totals.cached, 1);
  EXPECT_EQ(totals.prompt_tokens, 0);  // the replay was free
}

// A replay follows the recorded run call by call: a request that failed and then, asked
// again, succeeded fails and then succeeds again. A call the recorded run did not make, or
// made differently, is an error that says so; the server is never called.
TEST_F(LlmProposerTest, ReplayOnlyFollowsTheRecordedRunCallByCall) {
  server_.set_fallback(echo_seed);
  ScriptedReply overloaded;
  overloaded.status = 500;
  overloaded.body = "{\"error\": \"overloaded\"}";
  server_.script({overloaded, overloaded});  // the first call and its one retry
  std::vector<std::vector<std::vector<Proposal>>> live;
  {
    auto p = proposer();
    for (int i = 0; i < 2; ++i)
      live.push_back(p->propose(std::vector<ProposalRequest>{request(1)}));
  }
  ASSERT_TRUE(live[0][0].empty());  // the failed call
  ASSERT_EQ(live[1][0].size(), 1u);
  const int server_calls = server_.calls();

  settings_.replay_only = true;
  settings_.server.url = "http://127.0.0.1:1/v1";  // nothing there: a call would fail
  new_run();
  auto replay = proposer();
  for (int i = 0; i < 2; ++i) {
    const auto replayed = replay->propose(std::vector<ProposalRequest>{request(1)});
    ASSERT_EQ(replayed[0].size(), live[static_cast<std::size_t>(i)][0].size()) << i;
    if (!replayed[0].empty()) {
      EXPECT_EQ(replayed[0][0].source, live[1][0][0].source);
    }
  }
  const auto recorded = calls();
  ASSERT_EQ(recorded.size(), 2u);
  EXPECT_FALSE(recorded[0].error.empty());
  EXPECT_TRUE(recorded[1].error.empty());
  EXPECT_TRUE(recorded[1].cached);
  auto message_of = [](const std::function<void()>& call) {
    try {
      call();
    } catch (const propose::ProposerError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message_of([&] {
              replay->propose(std::vector<ProposalRequest>{request(1)});
            }).find("replaying only: run 1 made 2 model calls"),
            std::string::npos);
  new_run();
  EXPECT_NE(message_of([&] {
              proposer()->propose(std::vector<ProposalRequest>{request(2)});
            }).find("replaying only: the store has no recorded reply"),
            std::string::npos);
  new_run();
  auto diverging = proposer();
  diverging->propose(std::vector<ProposalRequest>{request(1)});
  EXPECT_NE(message_of([&] {
              diverging->propose(std::vector<ProposalRequest>{request(3)});
            }).find("has taken another path"),
            std::string::npos);
  EXPECT_EQ(server_.calls(), server_calls);
}

TEST_F(LlmProposerTest, CarriesOnThroughFaultsAndRecordsEach) {
  settings_.server.timeout_s = 0.5;
  settings_.concurrency = 1;  // the script is answered in request order
  ScriptedReply hang = reply_with(kTwoPrograms);
  hang.delay_s = 3;
  ScriptedReply limited;
  limited.status = 429;
  limited.headers = {{"Retry-After", "0"}};
  ScriptedReply garbage;
  garbage.body = "<html>not json</html>";
  ScriptedReply error;
  error.status = 500;
  ScriptedReply cut = reply_with("```ofl\nring over all\n```\n```ofl\nsplit 2 as r {\n  ring");
  cut.finish_reason = "length";
  server_.script({error, reply_with(kTwoPrograms),    // 500, then the retry succeeds
                  limited, reply_with(kTwoPrograms),  // 429, then the retry succeeds
                  hang, hang,                         // times out twice: the call fails
                  garbage,                            // not JSON: fails at once
                  reply_with("A ring would do."),     // prose, no program
                  cut});
  auto p = proposer();
  std::vector<ProposalRequest> requests;
  for (std::uint64_t s = 0; s < 6; ++s) requests.push_back(request(s));
  const auto proposals = p->propose(requests);
  ASSERT_EQ(proposals.size(), 6u);
  EXPECT_EQ(proposals[0].size(), 2u);
  EXPECT_EQ(proposals[1].size(), 2u);
  EXPECT_TRUE(proposals[2].empty());
  EXPECT_TRUE(proposals[3].empty());
  ASSERT_EQ(proposals[4].size(), 1u);  // the prose itself, to fail and be shown to the model
  EXPECT_NE(proposals[4][0].source.find("A ring would do."), std::string::npos);
  ASSERT_EQ(proposals[5].size(), 1u);  // the cut block is dropped
  EXPECT_EQ(proposals[5][0].source, "ring over all\n");
  const auto recorded = calls();
  ASSERT_EQ(recorded.size(), 6u);
  EXPECT_NE(recorded[2].error.find("timed out"), std::string::npos) << recorded[2].error;
  EXPECT_NE(recorded[3].error.find("not JSON"), std::string::npos) << recorded[3].error;
  EXPECT_EQ(recorded[5].finish_reason, "length");
  EXPECT_EQ(db::Store::open(db_.path()).model_call_totals(run_).failed, 2);
}

TEST_F(LlmProposerTest, ADeadServerEndsTheProposerWithAClearMessage) {
  settings_.server.url = "http://127.0.0.1:1/v1";
  settings_.server.retries = 0;
  auto p = proposer();
  try {
    std::vector<ProposalRequest> requests{request(1), request(2), request(3)};
    p->propose(requests);
    FAIL() << "three failed calls in a row went on";
  } catch (const propose::ProposerError& e) {
    EXPECT_NE(std::string(e.what()).find("failed 3 calls in a row"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("127.0.0.1:1"), std::string::npos) << e.what();
  }
  EXPECT_EQ(calls().size(), 3u);  // each failure is recorded
}

TEST_F(LlmProposerTest, StopsWhenTheTokenOrCostBudgetIsSpent) {
  server_.set_fallback([](const nlohmann::json&) { return reply_with(kTwoPrograms); });
  settings_.max_total_tokens = 10;
  auto p = proposer();
  EXPECT_EQ(p->stop_reason(), "");
  p->propose(std::vector<ProposalRequest>{request(1)});
  EXPECT_NE(p->stop_reason().find("token budget"), std::string::npos);
  settings_.max_total_tokens = 0;
  settings_.max_cost = 1e-9;
  EXPECT_NE(proposer()->stop_reason().find("cost budget"), std::string::npos);
}

TEST_F(LlmProposerTest, RepairsARejectedProgramOnceWithTheCompilersMessage) {
  server_.set_fallback(
      [](const nlohmann::json&) { return reply_with("```ofl\nbruck over all\n```"); });
  auto p = proposer();
  const std::vector<propose::Rejection> rejected{
      {Proposal{"rd over al\n", "llm", 1}, "prog:1:7: error: unknown group 'al'"},
      {Proposal{"ring over al\n", "offline", 0}, "prog:1:9: error: unknown group 'al'"}};
  const auto repaired = p->repair(rejected);
  ASSERT_EQ(repaired.size(), 2u);
  ASSERT_TRUE(repaired[0]);
  EXPECT_EQ(repaired[0]->source, "bruck over all\n");
  EXPECT_EQ(repaired[0]->model_call_id, calls().back().id);
  EXPECT_FALSE(repaired[1]) << "another proposer's program is not the model's to repair";
  EXPECT_EQ(calls().back().purpose, "repair");
  const std::string prompt = server_.requests().back()["messages"][1]["content"];
  EXPECT_NE(prompt.find("unknown group 'al'"), std::string::npos);
  EXPECT_NE(prompt.find("rd over al"), std::string::npos);
}

TEST_F(LlmProposerTest, TheKeyNeverReachesTheStore) {
  // A server that echoes the key into its reply and its errors.
  server_.set_fallback([](const nlohmann::json&) {
    return reply_with(std::string("your key is ") + kKey + "\n```ofl\nring over all\n```");
  });
  auto p = proposer();
  p->propose(std::vector<ProposalRequest>{request(1)});
  ScriptedReply denied;
  denied.status = 401;
  denied.body = std::string("{\"error\": \"bad key ") + kKey + "\"}";
  server_.script({denied});
  p->propose(std::vector<ProposalRequest>{request(1)});
  EXPECT_EQ(server_.authorization_headers().back(), std::string("Bearer ") + kKey);
  const auto recorded = calls();
  ASSERT_EQ(recorded.size(), 2u);
  EXPECT_NE(recorded[1].error.find("401"), std::string::npos);
  for (const char* suffix : {"", "-wal"})
    EXPECT_EQ(file_text(db_.path() + suffix).find(kKey), std::string::npos) << suffix;
}

TEST_F(LlmProposerTest, HashesOnlyKeepsNoTextAndCannotReplay) {
  server_.set_fallback([](const nlohmann::json&) { return reply_with(kTwoPrograms); });
  settings_.store_text = false;
  auto p = proposer();
  p->propose(std::vector<ProposalRequest>{request(1)});
  p->propose(std::vector<ProposalRequest>{request(1)});
  EXPECT_EQ(server_.calls(), 2);
  const auto recorded = calls();
  ASSERT_EQ(recorded.size(), 2u);
  EXPECT_EQ(recorded[0].request, recorded[0].request_hash);
  EXPECT_EQ(recorded[0].response, db::content_hash(kTwoPrograms));
  EXPECT_FALSE(recorded[0].text_stored);
  EXPECT_THROW(proposer()->propose(std::vector<ProposalRequest>{request(1)}),
               propose::ProposerError);  // resuming the run: nothing to answer from
  new_run();
  settings_.replay_only = true;
  EXPECT_THROW(proposer()->propose(std::vector<ProposalRequest>{request(1)}),
               propose::ProposerError);
}

TEST_F(LlmProposerTest, ModelsAreDrawnByWeightFromTheSeed) {
  server_.set_fallback([](const nlohmann::json&) { return reply_with(kTwoPrograms); });
  settings_.models = {{"fast", 3, 0, 0}, {"strong", 1, 0, 0}};
  std::vector<ProposalRequest> requests;
  for (std::uint64_t s = 0; s < 200; ++s) requests.push_back(request(s * 0x9e3779b97f4a7c15ULL));
  proposer()->propose(requests);
  int strong = 0;
  for (const auto& body : server_.requests()) strong += body["model"] == "strong" ? 1 : 0;
  EXPECT_GT(strong, 25);
  EXPECT_LT(strong, 75);
}

}  // namespace
}  // namespace optiflow::llm
