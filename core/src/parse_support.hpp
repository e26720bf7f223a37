// What the JSON and XML readers share: their libraries' errors turned into located messages.
#pragma once

#include <tinyxml2.h>

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace optiflow::core {

/// Parses JSON text; a syntax error becomes InputError at `source`:line:column.
nlohmann::json parse_json_text(std::string_view text, const std::string& source);

/// `text` with every invalid UTF-8 sequence replaced by U+FFFD, so that names read from XML
/// survive JSON output unchanged.
std::string valid_utf8(std::string_view text);

/// "malformed XML: mismatched element (...)" from tinyxml2's error name and detail.
std::string xml_error_message(const tinyxml2::XMLDocument& doc);

}  // namespace optiflow::core
