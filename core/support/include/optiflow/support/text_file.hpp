// Whole-file text input and output with errors that name the file.
#pragma once

#include <string>
#include <string_view>

namespace optiflow::support {

/// The file's bytes; InputError "cannot open file" naming it otherwise.
std::string read_text_file(const std::string& path);

/// Replaces the file's contents; InputError "cannot write file" naming it otherwise.
void write_text_file(const std::string& path, std::string_view text);

}  // namespace optiflow::support
