// The chat-completions client: request bodies, reply parsing, one libcurl POST per attempt, and
// the retry loop around it.
#include "optiflow/llm/chat_client.hpp"

#include <curl/curl.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <chrono>
#include <cmath>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>
#include <thread>

namespace optiflow::llm {
namespace {

using Kind = CallError::Kind;

constexpr std::string_view kCompletionsPath = "/chat/completions";
constexpr std::size_t kReplyExcerptChars = 80;
constexpr std::size_t kErrorBodyExcerptChars = 200;

std::string number(double value) {
  std::array<char, 32> text{};
  const auto [end, error] = std::to_chars(text.data(), text.data() + text.size(), value);
  return error == std::errc() ? std::string(text.data(), end) : std::string("?");
}

// Cuts at a character boundary so that a multi-byte UTF-8 sequence is never split.
std::string excerpt(const std::string& text, std::size_t max_chars) {
  if (text.size() <= max_chars) return text;
  std::size_t cut = max_chars;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  return text.substr(0, cut) + "...";
}

[[noreturn]] void bad_reply(const std::string& what) {
  throw CallError(Kind::bad_reply, what);
}

const nlohmann::json* member(const nlohmann::json& object, const char* key) {
  if (!object.is_object()) return nullptr;
  const auto found = object.find(key);
  return found == object.end() ? nullptr : &*found;
}

std::int64_t token_count(const nlohmann::json& usage, const char* key) {
  const nlohmann::json* count = member(usage, key);
  return count != nullptr && count->is_number_integer() ? count->get<std::int64_t>() : 0;
}

// curl_global_init must run before the first handle and is not thread-safe in every libcurl
// build, while complete() may be called from several threads at once.
void init_curl_once() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

struct HttpResponse {
  long status = 0;
  std::string body;
  std::optional<double> retry_after_s;
};

std::size_t append_body(char* data, std::size_t size, std::size_t count, void* response) {
  static_cast<HttpResponse*>(response)->body.append(data, size * count);
  return size * count;
}

std::string_view trim(std::string_view text) {
  const auto first = text.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) return {};
  return text.substr(first, text.find_last_not_of(" \t\r\n") - first + 1);
}

// Only the delay-seconds form; an HTTP-date leaves the back-off in charge.
std::optional<double> retry_after_seconds(std::string_view value) {
  double seconds = 0;
  const auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), seconds);
  if (error != std::errc() || end != value.data() + value.size() || !(seconds >= 0)) return {};
  return seconds;
}

// `lowercase_prefix` must be in lower case; header names are case-insensitive.
bool starts_with_nocase(std::string_view text, std::string_view lowercase_prefix) {
  return text.size() >= lowercase_prefix.size() &&
         std::equal(lowercase_prefix.begin(), lowercase_prefix.end(), text.begin(),
                    [](char expected, char actual) {
                      return std::tolower(static_cast<unsigned char>(actual)) == expected;
                    });
}

std::size_t read_header(char* data, std::size_t size, std::size_t count, void* user) {
  auto& response = *static_cast<HttpResponse*>(user);
  const std::string_view line(data, size * count);
  constexpr std::string_view kRetryAfter = "retry-after:";
  // A new status line (after a 100 Continue) starts a new header block.
  if (line.starts_with("HTTP/")) response.retry_after_s.reset();
  if (starts_with_nocase(line, kRetryAfter))
    response.retry_after_s = retry_after_seconds(trim(line.substr(kRetryAfter.size())));
  return size * count;
}

Kind transport_kind(CURLcode code) {
  return code == CURLE_OPERATION_TIMEDOUT ? Kind::timeout : Kind::connection;
}

std::string transport_message(CURLcode code, const char* error_text, double timeout_s) {
  if (code == CURLE_OPERATION_TIMEDOUT) return "timed out after " + number(timeout_s) + " s";
  return std::string("connection failed: ") +
         (*error_text != '\0' ? error_text : curl_easy_strerror(code));
}

using CurlHandle = std::unique_ptr<CURL, decltype(&curl_easy_cleanup)>;
using CurlHeaders = std::unique_ptr<curl_slist, decltype(&curl_slist_free_all)>;

CurlHeaders request_headers(const std::string& key) {
  curl_slist* headers = curl_slist_append(nullptr, "Content-Type: application/json");
  // Without this, curl waits up to a second for "100 Continue" before sending a large body.
  headers = curl_slist_append(headers, "Expect:");
  if (!key.empty()) headers = curl_slist_append(headers, ("Authorization: Bearer " + key).c_str());
  return CurlHeaders(headers, curl_slist_free_all);
}

// One attempt. Throws CallError(timeout | connection) when no response arrived; any HTTP
// status is returned for the caller to judge.
HttpResponse post(const std::string& url, const std::string& body, const ServerSettings& settings) {
  init_curl_once();
  CurlHandle curl(curl_easy_init(), curl_easy_cleanup);
  if (!curl) throw CallError(Kind::connection, "connection failed: curl_easy_init failed");
  const CurlHeaders headers = request_headers(settings.key);
  HttpResponse response;
  std::array<char, CURL_ERROR_SIZE> error_text{};
  const long timeout_ms = std::max(1L, std::lround(settings.timeout_s * 1000));

  CURL* handle = curl.get();
  curl_easy_setopt(handle, CURLOPT_URL, url.c_str());
  curl_easy_setopt(handle, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(handle, CURLOPT_TIMEOUT_MS, timeout_ms);
  curl_easy_setopt(handle, CURLOPT_HTTPHEADER, headers.get());
  curl_easy_setopt(handle, CURLOPT_POSTFIELDS, body.data());
  curl_easy_setopt(handle, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
  curl_easy_setopt(handle, CURLOPT_WRITEFUNCTION, append_body);
  curl_easy_setopt(handle, CURLOPT_WRITEDATA, &response);
  curl_easy_setopt(handle, CURLOPT_HEADERFUNCTION, read_header);
  curl_easy_setopt(handle, CURLOPT_HEADERDATA, &response);
  curl_easy_setopt(handle, CURLOPT_ERRORBUFFER, error_text.data());

  const CURLcode code = curl_easy_perform(handle);
  if (code != CURLE_OK)
    throw CallError(transport_kind(code),
                    transport_message(code, error_text.data(), settings.timeout_s));
  curl_easy_getinfo(handle, CURLINFO_RESPONSE_CODE, &response.status);
  return response;
}

struct Attempt {
  std::optional<ChatReply> reply;
  std::optional<CallError> error;  ///< set when reply is not
  std::optional<double> retry_after_s;
};

Attempt attempt(const std::string& url, const std::string& body, const ServerSettings& settings) {
  try {
    HttpResponse response = post(url, body, settings);
    if (response.status != 200) {
      const std::string message = "HTTP " + std::to_string(response.status) + ": " +
                                  excerpt(response.body, kErrorBodyExcerptChars);
      return {{}, CallError(Kind::http, message, response.status), response.retry_after_s};
    }
    return {parse_chat_reply(response.body), {}, {}};
  } catch (const CallError& error) {
    return {{}, error, {}};
  }
}

double backoff_seconds(const ServerSettings& settings, int retry_idx,
                       std::optional<double> retry_after_s) {
  const double wait_s =
      retry_after_s ? *retry_after_s : settings.backoff_s * std::pow(2.0, retry_idx);
  return std::clamp(wait_s, 0.0, std::max(0.0, settings.max_backoff_s));
}

CallError final_error(const CallError& error, const std::string& url, int attempts,
                      const std::string& key) {
  std::string message = "POST " + url + ": " + error.what();
  if (attempts > 1) message += " (after " + std::to_string(attempts) + " attempts)";
  return CallError(error.kind(), redact(std::move(message), key), error.status(), attempts);
}

}  // namespace

std::string request_body(const ChatRequest& request) {
  nlohmann::ordered_json body;
  body["model"] = request.model;
  body["messages"] = nlohmann::ordered_json::array();
  for (const Message& message : request.messages)
    body["messages"].push_back({{"role", message.role}, {"content", message.content}});
  body["temperature"] = request.temperature;
  body[request.use_max_completion_tokens ? "max_completion_tokens" : "max_tokens"] =
      request.max_tokens;
  if (request.seed) body["seed"] = *request.seed;
  return body.dump();
}

ChatReply parse_chat_reply(const std::string& body) {
  const nlohmann::json reply = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (reply.is_discarded())
    bad_reply("the reply is not JSON: " + excerpt(body, kReplyExcerptChars));
  const nlohmann::json* choices = member(reply, "choices");
  const nlohmann::json* choice =
      choices != nullptr && choices->is_array() && !choices->empty() ? &(*choices)[0] : nullptr;
  const nlohmann::json* message = choice != nullptr ? member(*choice, "message") : nullptr;
  const nlohmann::json* content = message != nullptr ? member(*message, "content") : nullptr;
  if (content == nullptr || !content->is_string())
    bad_reply("the reply has no choices[0].message.content: " + excerpt(body, kReplyExcerptChars));

  ChatReply parsed;
  parsed.text = content->get<std::string>();
  if (const nlohmann::json* finish = member(*choice, "finish_reason");
      finish != nullptr && finish->is_string())
    parsed.finish_reason = finish->get<std::string>();
  if (const nlohmann::json* usage = member(reply, "usage"); usage != nullptr) {
    parsed.prompt_tokens = token_count(*usage, "prompt_tokens");
    parsed.completion_tokens = token_count(*usage, "completion_tokens");
  }
  return parsed;
}

ChatClient::ChatClient(ServerSettings settings) : settings_(std::move(settings)) {}

std::string ChatClient::endpoint() const {
  std::string_view base = settings_.url;
  if (base.ends_with(kCompletionsPath)) return settings_.url;
  while (base.ends_with('/')) base.remove_suffix(1);
  return std::string(base) + std::string(kCompletionsPath);
}

ChatReply ChatClient::complete(const ChatRequest& request) const {
  const std::string url = endpoint();
  const std::string body = request_body(request);
  const int attempts = 1 + std::max(0, settings_.retries);
  for (int attempt_idx = 1;; ++attempt_idx) {
    Attempt result = attempt(url, body, settings_);
    if (result.reply) return std::move(*result.reply);
    if (!result.error->retryable() || attempt_idx == attempts)
      throw final_error(*result.error, url, attempt_idx, settings_.key);
    const double wait_s = backoff_seconds(settings_, attempt_idx - 1, result.retry_after_s);
    std::this_thread::sleep_for(std::chrono::duration<double>(wait_s));
  }
}

std::string redact(std::string text, const std::string& secret) {
  if (secret.empty()) return text;
  constexpr std::string_view kMask = "***";
  for (auto at = text.find(secret); at != std::string::npos;
       at = text.find(secret, at + kMask.size()))
    text.replace(at, secret.size(), kMask);
  return text;
}

}  // namespace optiflow::llm
