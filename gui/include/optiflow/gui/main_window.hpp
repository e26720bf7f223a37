// The main window: a toolbar choosing the topology and collective, and the five views as tabs.
#pragma once

#include <QMainWindow>
#include <QString>
#include <QStringList>
#include <string>

#include "optiflow/gui/views.hpp"

class QTabWidget;

namespace optiflow::gui {

class MainWindow : public QMainWindow {
  Q_OBJECT
 public:
  /// `topology` empty: the topology of the newest run in the database (or a100x4).
  explicit MainWindow(const std::string& db_path, const std::string& topology = {});
  /// Disconnects the toolbar first: closing the window moves the focus out of the topology
  /// box, which would apply a context whose members are already gone.
  ~MainWindow() override;

  TopologyView* topology_view() const { return topology_; }
  EditorView* editor_view() const { return editor_; }
  ExplorationView* exploration_view() const { return exploration_; }
  ComparisonView* comparison_view() const { return comparison_; }
  HistoryView* history_view() const { return history_; }
  QTabWidget* tabs() const { return tabs_; }
  const Context& context() const { return context_; }
  void set_topology(const QString& name);

  /// Fills every view with the database's data (the editor simulates the best stored program),
  /// waits for the workers, and writes topology.png, editor.png, exploration.png,
  /// comparison.png and history.png into `dir`. Returns the files written.
  QStringList save_screenshots(const QString& dir);

  /// Processes events until no view has work in flight or `timeout_ms` passed; true if idle.
  bool wait_idle(int timeout_ms = 60000);

 private:
  void apply_context();

  Context context_;
  QTabWidget* tabs_;
  TopologyView* topology_;
  EditorView* editor_;
  ExplorationView* exploration_;
  ComparisonView* comparison_;
  HistoryView* history_;
};

}  // namespace optiflow::gui
