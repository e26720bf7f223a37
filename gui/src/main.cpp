// `optiflow-gui` (what `optiflow gui` starts): the main window over a database, or with
// --screenshot one PNG per view, rendered offscreen.
#include <CLI/CLI.hpp>
#include <QApplication>
#include <cstdlib>
#include <iostream>

#include "optiflow/gui/main_window.hpp"

int main(int argc, char** argv) {
  CLI::App app{"OptiFlow GUI: topology, editor, exploration, comparison and history views"};
  std::string db = "optiflow.db", screenshot, topology;
  app.add_option("--db", db, "SQLite database")->capture_default_str();
  app.add_option("--topo", topology, "topology to start with (default: the newest run's)");
  app.add_option("--screenshot", screenshot,
                 "write topology.png, editor.png, exploration.png, comparison.png and history.png "
                 "into this folder and exit (offscreen, no display needed)");
  CLI11_PARSE(app, argc, argv);
  // A screenshot needs no display; without one the window could not open at all.
  if (!screenshot.empty() && !std::getenv("QT_QPA_PLATFORM"))
    setenv("QT_QPA_PLATFORM", "offscreen", 1);
  QApplication qt(argc, argv);
  QApplication::setApplicationName("OptiFlow");
  optiflow::gui::MainWindow window(db, topology);
  if (!screenshot.empty()) {
    const QStringList written = window.save_screenshots(QString::fromStdString(screenshot));
    for (const QString& path : written) std::cout << path.toStdString() << "\n";
    return written.size() == 5 ? 0 : 1;
  }
  window.show();
  return QApplication::exec();
}
