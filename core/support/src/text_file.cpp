#include "optiflow/support/text_file.hpp"

#include <fstream>
#include <sstream>

#include "optiflow/support/error.hpp"

namespace optiflow::support {

std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(SourceLocation{path, 0, 0, {}}, "cannot open file");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

void write_text_file(const std::string& path, std::string_view text) {
  std::ofstream out(path, std::ios::binary);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  if (!out.good()) throw InputError(SourceLocation{path, 0, 0, {}}, "cannot write file");
}

}  // namespace optiflow::support
