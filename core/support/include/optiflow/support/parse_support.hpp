// What the JSON and XML readers share: their libraries' errors turned into located messages.
#pragma once

#include <tinyxml2.h>

#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "optiflow/support/error.hpp"

namespace optiflow::support {

/// Parses JSON text; a syntax error becomes InputError at `source`:line:column.
nlohmann::json parse_json_text(std::string_view text, const std::string& source);

/// `text` with every invalid UTF-8 sequence replaced by U+FFFD, so that names read from XML
/// survive JSON output unchanged.
std::string valid_utf8(std::string_view text);

/// "malformed XML: mismatched element (...)" from tinyxml2's error name and detail.
std::string xml_error_message(const tinyxml2::XMLDocument& doc);

/// Typed fields of one JSON object, with errors that name the field's path
/// (e.g. `links[3].bw_GBps`) and the source.
class FieldReader {
 public:
  FieldReader(const nlohmann::json& object, std::string path, const std::string& source)
      : object_(object), path_(std::move(path)), source_(source) {
    if (!object_.is_object()) fail(path_, "must be an object");
  }

  [[noreturn]] void fail(const std::string& field, const std::string& message) const {
    throw InputError(SourceLocation{source_, 0, 0, field}, message);
  }
  std::string field(std::string_view key) const {
    return path_.empty() ? std::string(key) : path_ + "." + std::string(key);
  }
  const std::string& path() const { return path_; }
  const std::string& source() const { return source_; }
  bool has(const char* key) const { return object_.contains(key) && !object_[key].is_null(); }

  const nlohmann::json& required(const char* key, const char* what) const {
    if (!has(key)) fail(field(key), std::string("missing (required ") + what + ")");
    return object_[key];
  }
  std::string string(const char* key) const {
    const nlohmann::json& value = required(key, "string");
    if (!value.is_string()) fail(field(key), "must be a string");
    return value.get<std::string>();
  }
  std::string string_or(const char* key, std::string fallback) const {
    return has(key) ? string(key) : std::move(fallback);
  }
  std::int64_t integer(const char* key, std::int64_t min, std::int64_t max) const {
    return integer_value(required(key, "integer"), field(key), min, max);
  }
  std::int32_t int32(const char* key, std::int64_t min) const {
    return static_cast<std::int32_t>(integer(key, min, std::numeric_limits<std::int32_t>::max()));
  }
  std::int32_t int32_or(const char* key, std::int64_t min, std::int32_t fallback) const {
    return has(key) ? int32(key, min) : fallback;
  }
  double number(const char* key) const {
    const nlohmann::json& value = required(key, "number");
    if (!value.is_number()) fail(field(key), "must be a number");
    return value.get<double>();
  }
  double number_or(const char* key, double fallback) const {
    return has(key) ? number(key) : fallback;
  }
  bool boolean_or(const char* key, bool fallback) const {
    return has(key) ? boolean(key) : fallback;
  }
  bool boolean(const char* key) const {
    const nlohmann::json& value = required(key, "true or false");
    if (!value.is_boolean()) fail(field(key), "must be true or false");
    return value.get<bool>();
  }
  const nlohmann::json& array(const char* key) const {
    const nlohmann::json& value = required(key, "array");
    if (!value.is_array()) fail(field(key), "must be an array");
    return value;
  }
  std::int64_t integer_value(const nlohmann::json& value, const std::string& at, std::int64_t min,
                             std::int64_t max) const {
    if (!value.is_number_integer()) fail(at, "must be an integer");
    // Unsigned values past int64 would wrap in get<int64_t>(); they are out of range anyway.
    const bool too_big =
        value.is_number_unsigned() && value.get<std::uint64_t>() > static_cast<std::uint64_t>(max);
    if (too_big || value.get<std::int64_t>() < min || value.get<std::int64_t>() > max)
      fail(at, value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) +
                   " is out of range [" + std::to_string(min) + ", " + std::to_string(max) + "]");
    return value.get<std::int64_t>();
  }

 private:
  const nlohmann::json& object_;
  std::string path_;
  const std::string& source_;
};

}  // namespace optiflow::support
