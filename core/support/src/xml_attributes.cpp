#include "optiflow/support/xml_attributes.hpp"

#include <cctype>
#include <charconv>

#include "optiflow/support/error.hpp"

namespace optiflow::support {

std::string_view trim(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front())))
    text.remove_prefix(1);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back())))
    text.remove_suffix(1);
  return text;
}

std::optional<std::int64_t> parse_integer(std::string_view text, IntegerSyntax syntax) {
  int base = 10;
  if (syntax == IntegerSyntax::c_style && (text.starts_with("0x") || text.starts_with("0X"))) {
    base = 16;
    text.remove_prefix(2);
  }
  std::int64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value, base);
  if (text.empty() || ec != std::errc{} || end != text.data() + text.size()) return std::nullopt;
  return value;
}

void XmlAttributes::fail(const tinyxml2::XMLElement& e, std::string_view attribute,
                         const std::string& message) const {
  std::string field = "<" + std::string(e.Name());
  for (const auto& [name, key] : keys_)
    if (name == e.Name() && e.Attribute(key))
      field += " " + std::string(key) + "=\"" + e.Attribute(key) + "\"";
  field += attribute.empty() ? ">" : ">." + std::string(attribute);
  throw InputError(SourceLocation{source_, e.GetLineNum(), 0, field},
                   place_.empty() ? message : message + " (" + place_ + ")");
}

std::optional<std::string_view> XmlAttributes::text(const tinyxml2::XMLElement& e,
                                                    const char* attribute) const {
  const char* value = e.Attribute(attribute);
  if (!value || trim(value).empty()) return std::nullopt;
  return trim(value);
}

std::string_view XmlAttributes::required(const tinyxml2::XMLElement& e,
                                         const char* attribute) const {
  const auto value = text(e, attribute);
  if (!value) fail(e, attribute, "missing (required attribute)");
  return *value;
}

std::optional<std::int64_t> XmlAttributes::optional_integer(const tinyxml2::XMLElement& e,
                                                            const char* attribute, std::int64_t min,
                                                            std::int64_t max) const {
  const auto value = text(e, attribute);
  if (!value) return std::nullopt;
  const auto parsed = parse_integer(*value, syntax_);
  if (!parsed) fail(e, attribute, "'" + std::string(*value) + "' is not an integer");
  if (*parsed < min || *parsed > max)
    fail(e, attribute,
         std::string(*value) + " is out of range [" + std::to_string(min) + ", " +
             std::to_string(max) + "]");
  return *parsed;
}

std::int64_t XmlAttributes::integer(const tinyxml2::XMLElement& e, const char* attribute,
                                    std::int64_t min, std::int64_t max) const {
  const auto value = optional_integer(e, attribute, min, max);
  if (!value) fail(e, attribute, "missing (required attribute)");
  return *value;
}

}  // namespace optiflow::support
