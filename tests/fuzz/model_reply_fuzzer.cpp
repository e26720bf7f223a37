// libFuzzer target for what a model server sends back. Any bytes are a response body: either
// parse_chat_reply rejects them with a CallError, or the reply's text goes through
// extract_programs, cut off or not, which must keep its bounds (at most kMaxPrograms programs,
// each non-empty, newline-terminated, at most kMaxProgramBytes, no repeats). Anything else (another
// exception, a broken bound, a sanitizer report) is a crash.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "optiflow/llm/chat_client.hpp"
#include "optiflow/llm/reply_parser.hpp"

namespace {

using namespace optiflow::llm;

[[noreturn]] void broken(const char* what) {
  std::fprintf(stderr, "model_reply_fuzzer: %s\n", what);
  std::abort();
}

void check(const ExtractedPrograms& found) {
  if (found.programs.size() > kMaxPrograms) broken("too many programs");
  for (std::size_t i = 0; i < found.programs.size(); ++i) {
    const std::string& p = found.programs[i];
    if (p.size() < 2 || p.back() != '\n') broken("an empty or unterminated program");
    if (p.size() > kMaxProgramBytes + 1) broken("a program past the size bound");
    if (std::find(found.programs.begin(), found.programs.begin() + static_cast<long>(i), p) !=
        found.programs.begin() + static_cast<long>(i))
      broken("a repeated program");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string body(reinterpret_cast<const char*>(data), size);
  // The raw bytes as a reply's text too: a server may send anything inside the JSON.
  check(extract_programs(body, "stop"));
  check(extract_programs(body, "length"));
  try {
    const ChatReply reply = parse_chat_reply(body);
    check(extract_programs(reply.text, reply.finish_reason));
  } catch (const CallError& e) {
    if (e.kind() != CallError::Kind::bad_reply) broken("a parse error of the wrong kind");
  }
  return 0;
}
