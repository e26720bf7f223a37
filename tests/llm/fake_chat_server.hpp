// A scripted OpenAI-compatible chat-completions server, served over real HTTP from the test
// process, so that the client's HTTP, retry and timeout paths run as they do against a real one.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

namespace optiflow::testing {

struct ScriptedReply {
  int status = 200;
  std::string content;  ///< assistant text, wrapped into a chat completion JSON when body is empty
  std::string body;     ///< raw body sent as is when non-empty (e.g. "not json")
  std::string finish_reason = "stop";
  double delay_s = 0;  ///< sleep before answering (to test timeouts)
  std::vector<std::pair<std::string, std::string>> headers;  ///< e.g. {"Retry-After", "1"}
  /// -1: (chars of all message contents)/4 and content.size()/4, each at least 1
  std::int64_t prompt_tokens = -1, completion_tokens = -1;
};

/// A 200 with that assistant text.
ScriptedReply reply_with(std::string content);

class FakeChatServer {
 public:
  /// Listens on 127.0.0.1 on a free port and serves from its own threads; returns once it
  /// accepts connections.
  FakeChatServer();
  /// Stops and joins; a reply still in its delay_s is cut short.
  ~FakeChatServer();
  FakeChatServer(const FakeChatServer&) = delete;
  FakeChatServer& operator=(const FakeChatServer&) = delete;

  std::string url() const;  ///< "http://127.0.0.1:PORT/v1"
  int port() const;

  /// Replies to the next POST /v1/chat/completions requests, in order, after any replies still
  /// scripted; once they are used up, the fallback answers.
  void script(std::vector<ScriptedReply> replies);
  /// Answers requests when the script is empty (default: HTTP 500 "no scripted reply").
  /// Receives the parsed request body.
  void set_fallback(std::function<ScriptedReply(const nlohmann::json& request)> fallback);

  /// Every request body received, in order. A body that is not JSON gets a 400 and is neither
  /// recorded nor counted.
  std::vector<nlohmann::json> requests() const;
  /// The Authorization header of each request ("" when absent), in the order of requests().
  std::vector<std::string> authorization_headers() const;
  int calls() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace optiflow::testing
