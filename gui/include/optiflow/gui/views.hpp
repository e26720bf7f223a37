// The five views of the GUI (docs/gui.md). Each is a thin face over the libraries: what a
// view shows is what the matching command computes (topo show/bound, compile/sim, explore,
// compare, history). Long work runs on a worker thread; the widgets only show its results.
#pragma once

#include <QWidget>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "optiflow/db/store.hpp"
#include "optiflow/explore/compare.hpp"
#include "optiflow/explore/explore.hpp"
#include "optiflow/explore/sweep.hpp"
#include "optiflow/sim/simulator.hpp"
#include "optiflow/topology/topology.hpp"

class QChartView;
class QComboBox;
class QGraphicsScene;
class QGraphicsView;
class QLabel;
class QLineEdit;
class QListWidget;
class QPlainTextEdit;
class QProgressBar;
class QPushButton;
class QSpinBox;
class QTableWidget;
class QTextBrowser;
class QTimer;
class QCheckBox;
class QDateEdit;
class QResizeEvent;
class QShowEvent;

namespace optiflow::gui {

/// What every view works on: the database and the topology and collective chosen in the
/// main window's toolbar.
struct Context {
  std::string db_path = "optiflow.db";
  std::string topology = "a100x4";  ///< built-in name or topology JSON file
  support::Collective collective = support::Collective::all_gather;
};

/// Built-in example names plus every topology the database has runs or comparisons for.
std::vector<std::string> known_topologies(const std::string& db_path);

/// The topology drawn as a graph: GPUs grouped by host, switches and NICs, links coloured and
/// sized by bandwidth, the lower bound's bottleneck cut highlighted; after a simulation, links
/// coloured by utilisation.
class TopologyView : public QWidget {
  Q_OBJECT
 public:
  explicit TopologyView(QWidget* parent = nullptr);
  ~TopologyView() override;
  void set_context(const Context& context);
  /// Colours links by the utilisation of a simulation on this topology (empty: by bandwidth).
  void show_utilisation(const std::string& topology, const std::vector<sim::LinkUsage>& usage,
                        const QString& what);

  // For tests and the screenshot.
  int link_items() const;      ///< drawn links (a duplex pair is one)
  int cut_link_items() const;  ///< of which cross the bottleneck cut
  int node_items() const;
  bool colours_utilisation() const { return !usage_.empty(); }
  QString selected_link_text() const;
  /// Selects the drawn link between two nodes (either direction); false if there is none.
  bool select_link(const std::string& a, const std::string& b);

 protected:
  void resizeEvent(QResizeEvent* event) override;
  void showEvent(QShowEvent* event) override;

 private:
  void redraw();
  void on_selection();

  Context context_;
  std::unique_ptr<topology::Topology> topo_;
  std::vector<topology::NodeId> cut_inside_;
  std::vector<double> usage_;  ///< per link id; empty: none
  QString usage_what_;
  QGraphicsScene* scene_;
  QGraphicsView* view_;
  QLabel* summary_;
  QLabel* details_;
  int links_drawn_ = 0, cut_links_ = 0, nodes_drawn_ = 0;
};

/// One compile-and-simulate of the editor's program, as the worker hands it back.
struct Simulation {
  std::string error;                         ///< non-empty: it did not compile or simulate
  explore::Reference reference;              ///< the sizes, the bound and NCCL's pick
  std::vector<support::SizeResult> results;  ///< per size, with the bound
  std::vector<support::SizeResult> bound;    ///< per size: the bound, as a result
  struct Baseline {
    std::string name;
    std::vector<support::SizeResult> results;  ///< per size
  };
  std::vector<Baseline> baselines;
  schedule::Schedule schedule;
  sim::SimResult detail;  ///< at the timeline size, with the timeline recorded
  std::string topology;
  std::vector<std::string> link_names;  ///< per link id: "src -> dst"
};

/// A DSL editor with highlighting, diagnostics as you type (compiled on a worker after a
/// pause), a simulate button, the bandwidth curve with baselines and bound, and the timeline.
class EditorView : public QWidget {
  Q_OBJECT
 public:
  explicit EditorView(QWidget* parent = nullptr);
  ~EditorView() override;
  void set_context(const Context& context);
  void set_program(const QString& text);
  QString program() const;
  void simulate();
  bool busy() const;  ///< a compile pending or running, or a simulation running

  // For tests and the screenshot.
  QStringList diagnostics() const;
  int underlined() const;  ///< diagnostic underlines in the editor
  bool compiled_ok() const { return compiled_ok_; }
  QChartView* bandwidth_chart() const { return bandwidth_; }
  int timeline_bars() const { return timeline_bars_; }
  int critical_bars() const { return critical_bars_; }
  const Simulation* last_simulation() const { return last_.get(); }
  void set_timeline_rows_by_link(bool by_link);

 Q_SIGNALS:
  void simulated(const QString& topology, const std::vector<optiflow::sim::LinkUsage>& usage,
                 const QString& what);

 private:
  void schedule_compile();
  void start_compile();
  void compile_done(int generation, const QString& diagnostic, int line, int column);
  void simulation_done(std::shared_ptr<Simulation> result);
  void draw_bandwidth();
  void draw_timeline();

  Context context_;
  QPlainTextEdit* editor_;
  QListWidget* diagnostics_;
  QLabel* status_;
  QPushButton* simulate_button_;
  QComboBox* timeline_size_;
  QComboBox* timeline_rows_;
  QChartView* bandwidth_;
  QGraphicsView* timeline_;
  QGraphicsScene* timeline_scene_;
  QTimer* compile_timer_;
  int generation_ = 0;
  int compiling_ = 0;  ///< compiles in flight
  bool simulating_ = false;
  bool compiled_ok_ = false;
  int timeline_bars_ = 0, critical_bars_ = 0;
  std::shared_ptr<Simulation> last_;
};

/// Start, pause, resume and stop an exploration on a worker thread, with a live chart of the
/// best ratio to the bound per size and a live leaderboard; shows the newest stored run when
/// idle.
class ExplorationView : public QWidget {
  Q_OBJECT
 public:
  explicit ExplorationView(QWidget* parent = nullptr);
  ~ExplorationView() override;
  void set_context(const Context& context);

  void start();
  void pause();
  void resume();
  void stop();
  /// Shows a stored run (the chart from its progress, the leaderboard from its candidates).
  void show_run(db::Id run_id);

  enum class State { idle, running, paused, stopping };
  State state() const { return state_; }
  bool busy() const { return state_ != State::idle; }
  db::Id run_id() const { return run_id_; }
  QString finished_message() const;

  // For tests and the screenshot.
  QTableWidget* leaderboard() const { return leaderboard_; }
  QChartView* chart() const { return chart_; }
  void set_budget(int candidates);
  void set_sizes(const QString& sizes);
  void set_proposer(const QString& name);

 Q_SIGNALS:
  void open_program(const QString& source);
  void run_finished(qint64 run_id);

 private:
  void progress(const explore::Progress& p);
  void finished(const QString& message);
  void refresh_leaderboard();
  void set_state(State state);

  Context context_;
  QLineEdit* sizes_;
  QComboBox* proposer_;
  QSpinBox* budget_;
  QPushButton *start_, *pause_, *resume_, *stop_;
  QProgressBar* bar_;
  QLabel* status_;
  QChartView* chart_;
  QTableWidget* leaderboard_;
  State state_ = State::idle;
  db::Id run_id_ = 0;
  QString message_;
  std::vector<std::uint64_t> sizes_shown_;
  std::thread worker_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool paused_ = false;
  bool resume_requested_ = false;
  std::atomic<bool> stop_requested_{false};
};

/// `optiflow compare` for the chosen topology and contenders: the table and the bandwidth plot,
/// run on a worker or loaded from the database; exportable as PNG, SVG and CSV.
class ComparisonView : public QWidget {
  Q_OBJECT
 public:
  explicit ComparisonView(QWidget* parent = nullptr);
  ~ComparisonView() override;
  void set_context(const Context& context);
  void run();  ///< compare() with the ticked contenders, on a worker, stored
  bool busy() const { return running_; }
  void show_stored(db::Id comparison_id);
  const std::optional<explore::Comparison>& comparison() const { return comparison_; }

  void export_png(const QString& path) const;
  void export_svg(const QString& path) const;  ///< the plot `optiflow compare --plot` writes
  void export_csv(const QString& path) const;  ///< what `optiflow compare --csv` prints

  // For tests and the screenshot.
  QTableWidget* table() const { return table_; }
  QChartView* chart() const { return chart_; }
  void set_contenders(const QStringList& names);
  void set_sizes(const QString& sizes);

 private:
  void show(explore::Comparison comparison);
  void reload_stored();
  QString chosen_export(const QString& filter);

  Context context_;
  QComboBox* stored_;
  QLineEdit* sizes_;
  QComboBox* model_;
  std::vector<QCheckBox*> contenders_;
  QPushButton* run_;
  QLabel* status_;
  QTableWidget* table_;
  QChartView* chart_;
  std::optional<explore::Comparison> comparison_;
  bool running_ = false;
  std::thread worker_;
};

/// Runs filtered by topology, collective, date and origin; a run's best programs; a program's
/// lineage, model calls and results; a stored metric over time.
class HistoryView : public QWidget {
  Q_OBJECT
 public:
  explicit HistoryView(QWidget* parent = nullptr);
  void set_context(const Context& context);
  void refresh();
  void select_run(int row);
  void show_program(db::Id program_id);

  // For tests and the screenshot.
  QTableWidget* runs() const { return runs_; }
  QTableWidget* programs() const { return programs_; }
  QTableWidget* calibrations() const { return calibrations_; }
  QTextBrowser* lineage() const { return lineage_; }
  QChartView* metric_chart() const { return metric_; }
  void set_filter(const QString& topology, const QString& collective, const QString& origin);

 Q_SIGNALS:
  void open_program(const QString& source);

 private:
  void draw_metric();
  void show_calibrations(const std::vector<db::CalibrationRecord>& calibrations);

  Context context_;
  QComboBox *topology_, *collective_, *origin_, *metric_name_, *metric_size_;
  QCheckBox* since_on_;
  QDateEdit* since_;
  QTableWidget* runs_;
  QTableWidget* programs_;
  QTableWidget* calibrations_;  ///< optiflow calibrate's runs, newest first, whatever the filter
  QTextBrowser* lineage_;
  QChartView* metric_;
  db::Id shown_program_ = 0;
};

}  // namespace optiflow::gui
