// What the end-to-end tests share: running the real binary and reading what it wrote.
#pragma once

#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

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

/// `history export`'s CSV without the columns that differ between runs (run id, time).
inline std::string comparable_results(const std::string& csv) {
  std::istringstream in(csv);
  std::string line, out;
  while (std::getline(in, line)) {
    std::vector<std::string> cells;
    std::stringstream row(line);
    for (std::string cell; std::getline(row, cell, ',');) cells.push_back(cell);
    if (cells.size() < 2) continue;
    cells.erase(cells.begin());  // run_id
    cells.pop_back();            // recorded_at
    for (const auto& c : cells) out += c + ",";
    out += "\n";
  }
  return out;
}

}  // namespace optiflow::e2e
