// Typed access to XML attributes, for every XML reader (NCCL topology XML, MSCCL XML), with
// errors that name the source, the line, the element (with its identifying attribute, e.g.
// <gpu id="3">), the attribute, and where the reader is (e.g. "gpu 3, tb 1").
#pragma once

#include <tinyxml2.h>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>

namespace optiflow::support {

/// Surrounding whitespace removed.
std::string_view trim(std::string_view text);

enum class IntegerSyntax {
  decimal,
  c_style,  ///< decimal, or hexadecimal with 0x, as strtol(..., 0)
};
std::optional<std::int64_t> parse_integer(std::string_view text,
                                          IntegerSyntax syntax = IntegerSyntax::decimal);

class XmlAttributes {
 public:
  /// Per element name, the attribute that identifies an element in messages.
  using Key = std::pair<std::string_view, const char*>;

  XmlAttributes(const std::string& source, std::span<const Key> keys,
                IntegerSyntax syntax = IntegerSyntax::decimal)
      : source_(source), keys_(keys), syntax_(syntax) {}

  const std::string& source() const { return source_; }
  /// Where the reader is, appended to every message in parentheses ("" for nothing).
  void set_place(std::string place) { place_ = std::move(place); }

  [[noreturn]] void fail(const tinyxml2::XMLElement& e, std::string_view attribute,
                         const std::string& message) const;

  /// The trimmed value; absent and blank attributes are both nullopt.
  std::optional<std::string_view> text(const tinyxml2::XMLElement& e, const char* attribute) const;
  std::string_view required(const tinyxml2::XMLElement& e, const char* attribute) const;
  std::optional<std::int64_t> optional_integer(const tinyxml2::XMLElement& e, const char* attribute,
                                               std::int64_t min, std::int64_t max) const;
  std::int64_t integer(const tinyxml2::XMLElement& e, const char* attribute, std::int64_t min,
                       std::int64_t max) const;

  /// An enumerator by its name; `names` lists the valid ones for the message.
  template <class Enum>
  Enum name(const tinyxml2::XMLElement& e, const char* attribute,
            std::optional<Enum> (*from_string)(std::string_view), std::string_view names) const {
    const std::string_view value = required(e, attribute);
    const auto parsed = from_string(value);
    if (!parsed)
      fail(e, attribute, "unknown '" + std::string(value) + "' (" + std::string(names) + ")");
    return *parsed;
  }

 private:
  const std::string& source_;
  std::span<const Key> keys_;
  IntegerSyntax syntax_;
  std::string place_;
};

}  // namespace optiflow::support
