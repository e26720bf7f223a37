#include "optiflow/support/error.hpp"

namespace optiflow::support {

std::string format_diagnostic(const SourceLocation& where, const std::string& message) {
  std::string out = where.file.empty() ? std::string("<input>") : where.file;
  if (where.line > 0) {
    out += ':' + std::to_string(where.line);
    if (where.column > 0) out += ':' + std::to_string(where.column);
  }
  out += ": error: ";
  if (!where.field.empty()) out += where.field + ": ";
  out += message;
  return out;
}

}  // namespace optiflow::support
