// `optiflow gui`: starts `optiflow-gui` from the same folder (built where Qt6 is found), so
// that the command line itself never loads Qt.
#include <unistd.h>

#include <filesystem>
#include <stdexcept>
#include <vector>

#include "commands.hpp"

namespace optiflow::cli {
namespace {

struct GuiArgs {
  std::string db = "optiflow.db", screenshot, topology;
};

[[noreturn]] void run_gui(const GuiArgs& args) {
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe");
  const std::string gui = (self.parent_path() / "optiflow-gui").string();
  if (access(gui.c_str(), X_OK) != 0)
    throw std::runtime_error("no GUI in this build: " + gui +
                             " is missing (it is built where Qt6 Widgets and Charts are found)");
  std::vector<std::string> words = {gui, "--db", args.db};
  if (!args.screenshot.empty()) words.insert(words.end(), {"--screenshot", args.screenshot});
  if (!args.topology.empty()) words.insert(words.end(), {"--topo", args.topology});
  std::vector<char*> argv;
  for (std::string& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  execv(gui.c_str(), argv.data());
  throw std::runtime_error("cannot start " + gui);
}

}  // namespace

void add_gui_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("gui", "The Qt6 GUI over a database (docs/gui.md)");
  auto args = std::make_shared<GuiArgs>();
  cmd->add_option("--db", args->db, "SQLite database")->capture_default_str();
  cmd->add_option("--topo", args->topology, "topology to start with (default: the newest run's)");
  cmd->add_option("--screenshot", args->screenshot,
                  "write one PNG per view into this folder and exit (offscreen)");
  cmd->callback([args] { run_gui(*args); });
}

}  // namespace optiflow::cli
