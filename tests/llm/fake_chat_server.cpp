// The scripted chat-completions server: cpp-httplib on a free local port, one handler.
#include "fake_chat_server.hpp"

#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <deque>
#include <mutex>
#include <stdexcept>
#include <thread>

namespace optiflow::testing {
namespace {

using nlohmann::json;

constexpr auto kPollInterval = std::chrono::milliseconds(10);

std::int64_t prompt_chars(const json& request) {
  std::int64_t chars = 0;
  if (!request.is_object() || !request.contains("messages") || !request["messages"].is_array())
    return chars;
  for (const json& message : request["messages"])
    if (message.is_object() && message.contains("content") && message["content"].is_string())
      chars += static_cast<std::int64_t>(message["content"].get_ref<const std::string&>().size());
  return chars;
}

std::int64_t estimated_tokens(std::int64_t chars) {
  return std::max<std::int64_t>(1, chars / 4);
}

json completion(const ScriptedReply& reply, const json& request, int call_idx) {
  const std::int64_t prompt_tokens =
      reply.prompt_tokens >= 0 ? reply.prompt_tokens : estimated_tokens(prompt_chars(request));
  const std::int64_t completion_tokens =
      reply.completion_tokens >= 0
          ? reply.completion_tokens
          : estimated_tokens(static_cast<std::int64_t>(reply.content.size()));
  const bool has_model = request.is_object() && request.contains("model");
  return {
      {"id", "chatcmpl-" + std::to_string(call_idx)},
      {"object", "chat.completion"},
      {"model", has_model ? request["model"] : json("")},
      {"choices", json::array({{{"index", 0},
                                {"message", {{"role", "assistant"}, {"content", reply.content}}},
                                {"finish_reason", reply.finish_reason}}})},
      {"usage",
       {{"prompt_tokens", prompt_tokens},
        {"completion_tokens", completion_tokens},
        {"total_tokens", prompt_tokens + completion_tokens}}},
  };
}

ScriptedReply no_scripted_reply(const json& /*request*/) {
  ScriptedReply reply;
  reply.status = 500;
  reply.body = "no scripted reply";
  return reply;
}

}  // namespace

ScriptedReply reply_with(std::string content) {
  ScriptedReply reply;
  reply.content = std::move(content);
  return reply;
}

struct FakeChatServer::State {
  httplib::Server server;
  std::thread thread;
  int port = 0;
  std::atomic<bool> listen_returned{false};
  std::atomic<bool> stopping{false};

  mutable std::mutex mutex;
  std::deque<ScriptedReply> script;
  std::function<ScriptedReply(const json&)> fallback = no_scripted_reply;
  std::vector<json> requests;
  std::vector<std::string> authorization_headers;

  State() {
    // A client that gives up mid-request must not hold a server thread, and with it the
    // destructor, for long.
    server.set_read_timeout(5, 0);
    server.set_write_timeout(5, 0);
    server.set_keep_alive_timeout(1);
    server.Post("/v1/chat/completions",
                [this](const httplib::Request& request, httplib::Response& response) {
                  answer(request, response);
                });
    port = server.bind_to_any_port("127.0.0.1");
    if (port < 0) throw std::runtime_error("FakeChatServer: cannot bind a port on 127.0.0.1");
    thread = std::thread([this] {
      server.listen_after_bind();
      listen_returned = true;
    });
    // stop() is a no-op until the accept loop runs, so the destructor could not stop a server
    // that had not started yet.
    while (!server.is_running() && !listen_returned) std::this_thread::sleep_for(kPollInterval);
    if (listen_returned) {
      thread.join();
      throw std::runtime_error("FakeChatServer: the server on port " + std::to_string(port) +
                               " stopped at once");
    }
  }

  ~State() {
    stopping = true;
    server.stop();
    thread.join();
  }

  // Returns the reply for this request and its 1-based call number.
  std::pair<ScriptedReply, int> next_reply(const json& request, std::string authorization) {
    std::function<ScriptedReply(const json&)> answer_by_fallback;
    int call_idx = 0;
    {
      const std::lock_guard lock(mutex);
      requests.push_back(request);
      authorization_headers.push_back(std::move(authorization));
      call_idx = static_cast<int>(requests.size());
      if (!script.empty()) {
        ScriptedReply reply = std::move(script.front());
        script.pop_front();
        return {std::move(reply), call_idx};
      }
      answer_by_fallback = fallback;
    }
    // Outside the lock, so that a fallback may call back into the server.
    return {answer_by_fallback(request), call_idx};
  }

  // Sleeps in short slices so that stopping the server cuts a long delay short.
  bool sleep_unless_stopping(double delay_s) const {
    using Clock = std::chrono::steady_clock;
    const Clock::time_point until = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                                       std::chrono::duration<double>(delay_s));
    for (auto now = Clock::now(); now < until && !stopping; now = Clock::now())
      std::this_thread::sleep_for(std::min<Clock::duration>(kPollInterval, until - now));
    return !stopping;
  }

  void answer(const httplib::Request& http_request, httplib::Response& response) {
    const json request = json::parse(http_request.body, nullptr, /*allow_exceptions=*/false);
    if (request.is_discarded()) {
      response.status = 400;
      response.set_content("the request body is not JSON", "text/plain");
      return;
    }
    const auto [reply, call_idx] =
        next_reply(request, http_request.get_header_value("Authorization"));
    if (!sleep_unless_stopping(reply.delay_s)) {
      response.status = 503;
      return;
    }
    response.status = reply.status;
    for (const auto& [name, value] : reply.headers) response.set_header(name, value);
    const std::string body =
        reply.body.empty() ? completion(reply, request, call_idx).dump() : reply.body;
    response.set_content(body, "application/json");
  }
};

FakeChatServer::FakeChatServer() : state_(std::make_unique<State>()) {}

FakeChatServer::~FakeChatServer() = default;

std::string FakeChatServer::url() const {
  return "http://127.0.0.1:" + std::to_string(state_->port) + "/v1";
}

int FakeChatServer::port() const {
  return state_->port;
}

void FakeChatServer::script(std::vector<ScriptedReply> replies) {
  const std::lock_guard lock(state_->mutex);
  state_->script.insert(state_->script.end(), std::make_move_iterator(replies.begin()),
                        std::make_move_iterator(replies.end()));
}

void FakeChatServer::set_fallback(std::function<ScriptedReply(const json& request)> fallback) {
  const std::lock_guard lock(state_->mutex);
  state_->fallback = std::move(fallback);
}

std::vector<json> FakeChatServer::requests() const {
  const std::lock_guard lock(state_->mutex);
  return state_->requests;
}

std::vector<std::string> FakeChatServer::authorization_headers() const {
  const std::lock_guard lock(state_->mutex);
  return state_->authorization_headers;
}

int FakeChatServer::calls() const {
  const std::lock_guard lock(state_->mutex);
  return static_cast<int>(state_->requests.size());
}

}  // namespace optiflow::testing
