#include "optiflow/support/parse_support.hpp"

#include <algorithm>
#include <cctype>

#include "optiflow/support/error.hpp"

namespace optiflow::support {
namespace {

// nlohmann reports byte offsets; people want line and column.
SourceLocation location_of_offset(std::string_view text, std::size_t offset,
                                  const std::string& source) {
  SourceLocation where{source, 1, 1, {}};
  for (std::size_t i = 0; i < offset && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++where.line;
      where.column = 1;
    } else {
      ++where.column;
    }
  }
  return where;
}

}  // namespace

nlohmann::json parse_json_text(std::string_view text, const std::string& source) {
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    std::string message = e.what();
    // Drop nlohmann's "[json.exception.parse_error.101] parse error at line 1, column 2: "
    // prefix; the location is ours to print.
    if (auto colon = message.find(": "); colon != std::string::npos)
      message = message.substr(colon + 2);
    throw InputError(location_of_offset(text, e.byte > 0 ? e.byte - 1 : 0, source),
                     "invalid JSON: " + message);
  } catch (const nlohmann::json::out_of_range& e) {
    // A number past what a double holds ("number overflow parsing '1e999'"): located at the
    // number, which the message quotes.
    std::string message = e.what();
    if (auto bracket = message.find("] "); bracket != std::string::npos)
      message = message.substr(bracket + 2);
    std::size_t at = 0;
    if (const auto open = message.find('\''), close = message.rfind('\'');
        open != std::string::npos && close > open)
      at = std::min(text.find(message.substr(open + 1, close - open - 1)), text.size());
    throw InputError(location_of_offset(text, at, source), "invalid JSON: " + message);
  }
}

std::string valid_utf8(std::string_view text) {
  const std::string quoted = nlohmann::json(std::string(text))
                                 .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return nlohmann::json::parse(quoted).get<std::string>();
}

std::string xml_error_message(const tinyxml2::XMLDocument& doc) {
  std::string message = doc.ErrorName();  // "XML_ERROR_MISMATCHED_ELEMENT" -> "mismatched element"
  if (message.starts_with("XML_ERROR_")) message.erase(0, 10);
  for (char& c : message)
    c = c == '_' ? ' ' : static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  const std::string detail = doc.ErrorStr();
  if (const auto colon = detail.find(": "); colon != std::string::npos)
    message += " (" + detail.substr(colon + 2) + ")";
  else if (message == "parsing")  // tinyxml2's catch-all: an element left open at the end, ...
    message = "an element is not closed, or a tag is cut off (from this line on)";
  return "malformed XML: " + message;
}

}  // namespace optiflow::support
