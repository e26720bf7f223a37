// A client for OpenAI-compatible chat-completions servers (hosted APIs, vLLM, llama.cpp
// server, Ollama) over HTTP(S) with libcurl, with retries and back-off. The API key goes into
// the Authorization header and nowhere else: not into the request body, errors or logs.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace optiflow::llm {

struct Message {
  std::string role;  ///< "system" | "user" | "assistant"
  std::string content;
};

struct ChatRequest {
  std::string model;
  std::vector<Message> messages;
  double temperature = 0.7;
  std::int64_t max_tokens = 4096;
  /// Reasoning models (OpenAI o-series, ...) take max_completion_tokens instead of max_tokens.
  bool use_max_completion_tokens = false;
  std::optional<std::uint64_t> seed;
};

/// The JSON body sent for `request`: keys in a fixed order, so equal requests give equal
/// bodies (the replay cache keys on it). Holds no credentials.
std::string request_body(const ChatRequest& request);

struct ChatReply {
  std::string text;           ///< choices[0].message.content
  std::string finish_reason;  ///< "stop", "length" (cut at max tokens), ...; may be empty
  std::int64_t prompt_tokens = 0, completion_tokens = 0;  ///< usage; 0 when not reported
};

/// Reads a chat-completions response body. Throws CallError(bad_reply) when it is not JSON or
/// has no choices[0].message.content string; the message says which.
ChatReply parse_chat_reply(const std::string& body);

struct ServerSettings {
  /// Base URL, e.g. http://localhost:8000/v1; "/chat/completions" is appended unless the URL
  /// already ends with it.
  std::string url;
  std::string key;         ///< bearer token; empty: no Authorization header
  double timeout_s = 120;  ///< per attempt, connection included
  int retries = 4;         ///< further attempts after a timeout, a refused connection, 429 or 5xx
  double backoff_s = 1;    ///< wait before the first retry; doubles with each retry
  double max_backoff_s = 60;  ///< cap on any wait, Retry-After included
};

class CallError : public std::runtime_error {
 public:
  enum class Kind {
    timeout,     ///< no complete response within timeout_s
    connection,  ///< refused, unresolvable, reset: the server is not there
    http,        ///< a status other than 200 (status() says which)
    bad_reply,   ///< 200, but the body is not a chat completion
  };
  CallError(Kind kind, const std::string& message, long status = 0, int attempts = 1)
      : std::runtime_error(message), kind_(kind), status_(status), attempts_(attempts) {}
  Kind kind() const { return kind_; }
  long status() const { return status_; }  ///< HTTP status; 0 when none was received
  int attempts() const { return attempts_; }
  /// Worth another attempt: a timeout, a lost connection, 429 or a 5xx.
  bool retryable() const {
    return kind_ == Kind::timeout || kind_ == Kind::connection ||
           (kind_ == Kind::http && (status_ == 429 || status_ >= 500));
  }

 private:
  Kind kind_;
  long status_;
  int attempts_;
};

/// Sends chat requests. Safe to call from several threads at once (one curl handle per call).
class ChatClient {
 public:
  explicit ChatClient(ServerSettings settings);

  /// Sends `request`, retrying what CallError::retryable() says with exponential back-off
  /// (honouring a Retry-After header in seconds), and returns the reply. Throws CallError
  /// after the last attempt, or at once for what retrying cannot fix (400, 401, 404, a body
  /// that is not a chat completion); its message names the URL and the status or curl error,
  /// never the key.
  ChatReply complete(const ChatRequest& request) const;

  const ServerSettings& settings() const { return settings_; }
  std::string endpoint() const;

 private:
  ServerSettings settings_;
};

/// `text` with every occurrence of `secret` replaced by "***" (nothing when secret is empty).
std::string redact(std::string text, const std::string& secret);

}  // namespace optiflow::llm
