// The chat client against a scripted server over real HTTP: replies, request bodies, the key's
// confinement to the Authorization header, retries and back-off, timeouts, refused connections
// and replies that are not chat completions.
#include "optiflow/llm/chat_client.hpp"

#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <nlohmann/json.hpp>

#include "fake_chat_server.hpp"

namespace optiflow::llm {
namespace {

using testing::FakeChatServer;
using testing::reply_with;
using testing::ScriptedReply;
using Kind = CallError::Kind;
using Clock = std::chrono::steady_clock;

constexpr const char* kKey = "sk-test-SECRET-123";

ServerSettings fast_settings(const FakeChatServer& server) {
  ServerSettings settings;
  settings.url = server.url();
  settings.timeout_s = 5;
  settings.retries = 2;
  settings.backoff_s = 0.01;
  return settings;
}

ChatRequest hello_request() {
  ChatRequest request;
  request.model = "test-model";
  request.messages = {{"system", "You write schedules."}, {"user", "Hello"}};
  request.temperature = 0.5;
  request.max_tokens = 100;
  return request;
}

ScriptedReply status_reply(int status, std::string body) {
  ScriptedReply reply;
  reply.status = status;
  reply.body = std::move(body);
  return reply;
}

CallError call_error(const ChatClient& client, const ChatRequest& request) {
  try {
    client.complete(request);
  } catch (const CallError& error) {
    return error;
  }
  ADD_FAILURE() << "complete() returned instead of throwing CallError";
  return CallError(Kind::bad_reply, "complete() did not throw");
}

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

TEST(ChatClient, ReturnsTheTextFinishReasonAndTokens) {
  FakeChatServer server;
  ScriptedReply reply = reply_with("ring 0 1 2 3");
  reply.finish_reason = "length";
  reply.prompt_tokens = 12;
  reply.completion_tokens = 3;
  server.script({reply});

  const ChatReply got = ChatClient(fast_settings(server)).complete(hello_request());

  EXPECT_EQ(got.text, "ring 0 1 2 3");
  EXPECT_EQ(got.finish_reason, "length");
  EXPECT_EQ(got.prompt_tokens, 12);
  EXPECT_EQ(got.completion_tokens, 3);
  EXPECT_EQ(server.calls(), 1);
}

TEST(ChatClient, EstimatesTokensWhenTheScriptGivesNone) {
  FakeChatServer server;
  server.script({reply_with("12345678")});
  const ChatReply got = ChatClient(fast_settings(server)).complete(hello_request());
  // "You write schedules." and "Hello" are 25 characters.
  EXPECT_EQ(got.prompt_tokens, 25 / 4);
  EXPECT_EQ(got.completion_tokens, 2);
}

TEST(ChatClient, SendsTheBodyThatRequestBodyDescribes) {
  ChatRequest request = hello_request();
  request.seed = 7;
  EXPECT_EQ(request_body(request),
            R"({"model":"test-model","messages":[{"role":"system","content":"You write )"
            R"(schedules."},{"role":"user","content":"Hello"}],"temperature":0.5,)"
            R"("max_tokens":100,"seed":7})");

  FakeChatServer server;
  server.script({reply_with("a"), reply_with("b")});
  const ChatClient client(fast_settings(server));
  client.complete(request);
  request.use_max_completion_tokens = true;
  request.seed.reset();
  client.complete(request);

  const std::vector<nlohmann::json> sent = server.requests();
  ASSERT_EQ(sent.size(), 2u);
  request.use_max_completion_tokens = false;
  request.seed = 7;
  EXPECT_EQ(sent[0], nlohmann::json::parse(request_body(request)));
  EXPECT_EQ(sent[1].value("max_completion_tokens", 0), 100);
  EXPECT_FALSE(sent[1].contains("max_tokens"));
  EXPECT_FALSE(sent[1].contains("seed"));
}

TEST(ChatClient, PutsTheKeyOnlyIntoTheAuthorizationHeader) {
  FakeChatServer server;
  server.script({reply_with("ok"), status_reply(401, std::string("invalid key ") + kKey)});
  ServerSettings settings = fast_settings(server);
  settings.key = kKey;
  const ChatClient client(settings);

  client.complete(hello_request());
  const CallError rejected = call_error(client, hello_request());

  EXPECT_EQ(
      server.authorization_headers(),
      std::vector<std::string>({std::string("Bearer ") + kKey, std::string("Bearer ") + kKey}));
  EXPECT_EQ(server.requests()[0].dump().find(kKey), std::string::npos);
  EXPECT_EQ(rejected.status(), 401);
  EXPECT_EQ(std::string(rejected.what()).find(kKey), std::string::npos) << rejected.what();
  EXPECT_NE(std::string(rejected.what()).find("invalid key ***"), std::string::npos)
      << rejected.what();
}

TEST(ChatClient, KeepsAKeyInTheUrlOutOfErrors) {
  int port = 0;
  {
    const FakeChatServer gone;
    port = gone.port();
  }
  ServerSettings settings;
  settings.url = std::string("http://user:") + kKey + "@127.0.0.1:" + std::to_string(port) + "/v1";
  settings.key = kKey;
  settings.retries = 0;
  const CallError error = call_error(ChatClient(settings), hello_request());
  EXPECT_EQ(std::string(error.what()).find(kKey), std::string::npos) << error.what();
}

TEST(ChatClient, SendsNoAuthorizationHeaderWithoutAKey) {
  FakeChatServer server;
  server.script({reply_with("ok")});
  ChatClient(fast_settings(server)).complete(hello_request());
  EXPECT_EQ(server.authorization_headers(), std::vector<std::string>{""});
}

TEST(ChatClient, RetriesAfterA500) {
  FakeChatServer server;
  server.script({status_reply(500, "overloaded"), reply_with("ok")});
  EXPECT_EQ(ChatClient(fast_settings(server)).complete(hello_request()).text, "ok");
  EXPECT_EQ(server.calls(), 2);
}

TEST(ChatClient, WaitsForRetryAfterOn429) {
  FakeChatServer server;
  ScriptedReply busy = status_reply(429, R"({"error":{"message":"rate limited"}})");
  busy.headers = {{"Retry-After", "1"}};
  server.script({busy, reply_with("ok")});

  const auto start = Clock::now();
  EXPECT_EQ(ChatClient(fast_settings(server)).complete(hello_request()).text, "ok");
  EXPECT_GE(seconds_since(start), 0.9);
  EXPECT_EQ(server.calls(), 2);
}

TEST(ChatClient, CapsRetryAfterAtMaxBackoff) {
  FakeChatServer server;
  ScriptedReply busy = status_reply(429, "slow down");
  busy.headers = {{"Retry-After", "30"}};
  server.script({busy, reply_with("ok")});
  ServerSettings settings = fast_settings(server);
  settings.max_backoff_s = 0.05;

  const auto start = Clock::now();
  EXPECT_EQ(ChatClient(settings).complete(hello_request()).text, "ok");
  EXPECT_LT(seconds_since(start), 2.0);
}

TEST(ChatClient, BacksOffNormallyWhenRetryAfterIsADate) {
  FakeChatServer server;
  ScriptedReply busy = status_reply(503, "maintenance");
  busy.headers = {{"Retry-After", "Wed, 21 Oct 2015 07:28:00 GMT"}};
  server.script({busy, reply_with("ok")});

  const auto start = Clock::now();
  EXPECT_EQ(ChatClient(fast_settings(server)).complete(hello_request()).text, "ok");
  EXPECT_LT(seconds_since(start), 2.0);
}

TEST(ChatClient, GivesUpAfterTheLastAttempt) {
  FakeChatServer server;
  ServerSettings settings = fast_settings(server);
  const CallError error = call_error(ChatClient(settings), hello_request());

  EXPECT_EQ(error.kind(), Kind::http);
  EXPECT_EQ(error.status(), 500);
  EXPECT_EQ(error.attempts(), settings.retries + 1);
  EXPECT_EQ(server.calls(), settings.retries + 1);
  EXPECT_EQ(std::string(error.what()), "POST " + server.url() +
                                           "/chat/completions: HTTP 500: no scripted reply "
                                           "(after 3 attempts)");
}

TEST(ChatClient, FailsAtOnceOn400) {
  FakeChatServer server;
  server.script({status_reply(400, "bad request"), reply_with("never sent")});
  const CallError error = call_error(ChatClient(fast_settings(server)), hello_request());

  EXPECT_EQ(error.kind(), Kind::http);
  EXPECT_EQ(error.status(), 400);
  EXPECT_EQ(error.attempts(), 1);
  EXPECT_FALSE(error.retryable());
  EXPECT_EQ(server.calls(), 1);
  EXPECT_EQ(std::string(error.what()).find("after"), std::string::npos) << error.what();
}

TEST(ChatClient, TimesOutOnAReplyThatHangs) {
  FakeChatServer server;
  ScriptedReply hang = reply_with("too late");
  hang.delay_s = 3;
  server.script({hang});
  ServerSettings settings = fast_settings(server);
  settings.timeout_s = 0.5;
  settings.retries = 0;

  const auto start = Clock::now();
  const CallError error = call_error(ChatClient(settings), hello_request());

  EXPECT_LT(seconds_since(start), 2.0);
  EXPECT_EQ(error.kind(), Kind::timeout);
  EXPECT_EQ(error.status(), 0);
  EXPECT_NE(std::string(error.what()).find("timed out after 0.5 s"), std::string::npos)
      << error.what();
}

TEST(ChatClient, ReportsARefusedConnection) {
  std::string url;
  {
    const FakeChatServer gone;
    url = gone.url();
  }
  ServerSettings settings;
  settings.url = url;
  settings.retries = 1;
  settings.backoff_s = 0.01;
  const CallError error = call_error(ChatClient(settings), hello_request());

  EXPECT_EQ(error.kind(), Kind::connection);
  EXPECT_EQ(error.attempts(), 2);
  EXPECT_NE(std::string(error.what()).find("connection failed: "), std::string::npos)
      << error.what();
}

TEST(ChatClient, DoesNotRetryABodyThatIsNotJson) {
  FakeChatServer server;
  server.script({status_reply(200, "not json"), reply_with("never sent")});
  const CallError error = call_error(ChatClient(fast_settings(server)), hello_request());

  EXPECT_EQ(error.kind(), Kind::bad_reply);
  EXPECT_EQ(server.calls(), 1);
  EXPECT_NE(std::string(error.what()).find("the reply is not JSON: not json"), std::string::npos)
      << error.what();
}

TEST(ChatClient, RejectsJsonWithoutChoices) {
  FakeChatServer server;
  server.script({status_reply(200, R"({"object":"chat.completion"})")});
  const CallError error = call_error(ChatClient(fast_settings(server)), hello_request());

  EXPECT_EQ(error.kind(), Kind::bad_reply);
  EXPECT_NE(std::string(error.what()).find("the reply has no choices[0].message.content"),
            std::string::npos)
      << error.what();
}

TEST(ChatClient, RejectsNullContent) {
  EXPECT_THROW(parse_chat_reply(R"({"choices":[{"message":{"role":"assistant","content":null}}]})"),
               CallError);
  const ChatReply bare = parse_chat_reply(R"({"choices":[{"message":{"content":"x"}}]})");
  EXPECT_EQ(bare.text, "x");
  EXPECT_EQ(bare.finish_reason, "");
  EXPECT_EQ(bare.prompt_tokens, 0);
}

TEST(ChatClient, AppendsTheCompletionsPathOnce) {
  ServerSettings settings;
  settings.url = "http://localhost:8000/v1/";
  EXPECT_EQ(ChatClient(settings).endpoint(), "http://localhost:8000/v1/chat/completions");
  settings.url = "http://localhost:8000/v1/chat/completions";
  EXPECT_EQ(ChatClient(settings).endpoint(), settings.url);
}

TEST(Redact, ReplacesEveryOccurrence) {
  EXPECT_EQ(redact("a KEY b KEYKEY", "KEY"), "a *** b ******");
  EXPECT_EQ(redact("nothing here", "KEY"), "nothing here");
}

TEST(Redact, LeavesTextAloneForAnEmptySecret) {
  EXPECT_EQ(redact("a b", ""), "a b");
}

TEST(FakeChatServer, AnswersUnknownPathsAndBadBodies) {
  FakeChatServer server;
  httplib::Client http("127.0.0.1", server.port());
  const auto unknown = http.Post("/v1/completions", "{}", "application/json");
  ASSERT_TRUE(unknown);
  EXPECT_EQ(unknown->status, 404);
  const auto not_json = http.Post("/v1/chat/completions", "{", "application/json");
  ASSERT_TRUE(not_json);
  EXPECT_EQ(not_json->status, 400);
  EXPECT_EQ(server.calls(), 0);
}

TEST(FakeChatServer, FallbackSeesTheRequest) {
  FakeChatServer server;
  server.set_fallback([](const nlohmann::json& request) {
    return reply_with("model " + request.value("model", std::string()));
  });
  const ChatReply got = ChatClient(fast_settings(server)).complete(hello_request());
  EXPECT_EQ(got.text, "model test-model");
}

}  // namespace
}  // namespace optiflow::llm
