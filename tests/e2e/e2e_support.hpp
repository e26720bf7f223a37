// What the end-to-end tests share: running the real binary and reading what it wrote.
#pragma once

#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace optiflow::e2e {

inline std::string slurp(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

/// Runs `optiflow ARGS` (shell words) with `env` (VAR=value ..., may be empty) in front, its
/// standard output and error going to `dir`/out and `dir`/err; returns its exit status, -1 if
/// it did not exit.
inline int run_optiflow(const std::filesystem::path& dir, const std::string& args,
                        std::string* out = nullptr, const std::string& env = "") {
  const std::string command = env + " '" + OPTIFLOW_BINARY + "' " + args + " >'" +
                              (dir / "out").string() + "' 2>'" + (dir / "err").string() + "'";
  const int status = std::system(command.c_str());
  if (out) *out = slurp(dir / "out");
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace optiflow::e2e
