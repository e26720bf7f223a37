// The GUI's views against a real database made by explore() and compare(), offscreen
// (QT_QPA_PLATFORM=offscreen): assertions on the widgets' models and states.
#include <gtest/gtest.h>

#include <QApplication>
#include <QChartView>
#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QImage>
#include <QLineSeries>
#include <QProcess>
#include <QTabWidget>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QTest>
#include <QTextBrowser>
#include <cstdlib>
#include <functional>
#include <map>
#include <set>

#include "optiflow/db/history.hpp"
#include "optiflow/explore/compare.hpp"
#include "optiflow/explore/explore.hpp"
#include "optiflow/gui/main_window.hpp"
#include "optiflow/propose/proposer.hpp"
#include "optiflow/support/sizes.hpp"
#include "optiflow/support/text_file.hpp"
#include "optiflow/topology/bounds.hpp"
#include "optiflow/topology/topology_io.hpp"

namespace optiflow::gui {
namespace {

constexpr const char* kTopology = "a100x2";
constexpr const char* kSizes = "64K,1M,16M,256M";

bool wait_for(const std::function<bool()>& done, int timeout_ms = 120000) {
  QElapsedTimer clock;
  clock.start();
  while (!done() && clock.elapsed() < timeout_ms) {
    QApplication::processEvents(QEventLoop::AllEvents, 20);
    QTest::qWait(10);
  }
  return done();
}

std::vector<QString> series_names(QChartView* view) {
  std::vector<QString> names;
  for (QAbstractSeries* s : view->chart()->series()) names.push_back(s->name());
  return names;
}

int points_in(QChartView* view) {
  int n = 0;
  for (QAbstractSeries* s : view->chart()->series())
    if (auto* xy = qobject_cast<QXYSeries*>(s)) n += static_cast<int>(xy->count());
  return n;
}

propose::ProposerFactory offline() {
  return [](const std::string&, const propose::ProposalContext& context) {
    return propose::make_offline_proposer(context);
  };
}

// One database for the suite, made as `optiflow explore` and `optiflow compare` make it.
class GuiTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new QTemporaryDir();
    db_ = QDir(dir_->path()).filePath("gui.db").toStdString();
    explore::ExploreOptions options;
    options.topology = kTopology;
    options.sizes = support::parse_sizes(kSizes);
    options.budget = 32;
    options.db_path = db_;
    options.out_dir = QDir(dir_->path()).filePath("out").toStdString();
    explore::explore(options, offline());
    explore::CompareOptions compare;
    compare.topology = kTopology;
    compare.sizes = options.sizes;
    compare.with = {"ours", "nccl", "nccl-ring"};
    compare.db_path = db_;
    explore::compare(compare);
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static QTemporaryDir* dir_;
  static std::string db_;
};
QTemporaryDir* GuiTest::dir_ = nullptr;
std::string GuiTest::db_;

TEST_F(GuiTest, TopologyViewDrawsEveryNodeAndLinkAndTheBottleneckCut) {
  MainWindow window(db_, kTopology);
  TopologyView* view = window.topology_view();
  const auto topo = topology::load_topology(kTopology);
  std::set<std::pair<topology::NodeId, topology::NodeId>> pairs;
  for (const auto& l : topo.links()) pairs.insert(std::minmax(l.src, l.dst));
  EXPECT_EQ(view->node_items(), static_cast<int>(topo.node_count()));
  EXPECT_EQ(view->link_items(), static_cast<int>(pairs.size()));
  // The drawn cut is the bound's: every linked pair with one node inside it.
  const auto cut =
      topology::LowerBound::compute(topo, support::Collective::all_gather).phases().front().cut;
  const std::set<topology::NodeId> inside(cut.inside.begin(), cut.inside.end());
  int crossing = 0;
  for (const auto& [a, b] : pairs) crossing += inside.contains(a) != inside.contains(b) ? 1 : 0;
  ASSERT_GT(crossing, 0);
  EXPECT_EQ(view->cut_link_items(), crossing);
  ASSERT_TRUE(view->select_link("h0.gpu0", "h0.nvswitch"));
  EXPECT_TRUE(view->selected_link_text().contains("240 GB/s"))
      << view->selected_link_text().toStdString();
  EXPECT_FALSE(view->select_link("h0.gpu0", "h1.gpu0"));  // no such link
  EXPECT_FALSE(view->colours_utilisation());
}

TEST_F(GuiTest, EditorUnderlinesABrokenProgramAndClearsItWhenFixed) {
  MainWindow window(db_, kTopology);
  EditorView* editor = window.editor_view();
  editor->set_program("ring over all\nbinomial over nowhere\n");
  ASSERT_TRUE(wait_for([&] { return !editor->busy(); }));
  ASSERT_EQ(editor->diagnostics().size(), 1);
  EXPECT_TRUE(editor->diagnostics().front().contains("editor:2:"))
      << editor->diagnostics().front().toStdString();
  EXPECT_EQ(editor->underlined(), 1);
  EXPECT_FALSE(editor->compiled_ok());
  editor->set_program("ring over all\n");
  ASSERT_TRUE(wait_for([&] { return !editor->busy(); }));
  EXPECT_TRUE(editor->diagnostics().isEmpty());
  EXPECT_EQ(editor->underlined(), 0);
  EXPECT_TRUE(editor->compiled_ok());
}

TEST_F(GuiTest, SimulateDrawsTheBandwidthCurveTimelineAndUtilisation) {
  MainWindow window(db_, kTopology);
  EditorView* editor = window.editor_view();
  editor->set_program("ring over all\n");
  ASSERT_TRUE(wait_for([&] { return !editor->busy(); }));
  editor->simulate();
  ASSERT_TRUE(wait_for([&] { return !editor->busy(); }));
  ASSERT_NE(editor->last_simulation(), nullptr);
  const auto names = series_names(editor->bandwidth_chart());
  EXPECT_NE(std::find(names.begin(), names.end(), "this program"), names.end());
  EXPECT_NE(std::find(names.begin(), names.end(), "lower bound"), names.end());
  EXPECT_NE(std::find(names.begin(), names.end(), "nccl"), names.end());
  EXPECT_EQ(points_in(editor->bandwidth_chart()),
            static_cast<int>(names.size() * editor->last_simulation()->reference.sizes.size()));
  // A ring on 16 GPUs: 15 steps per rank, each a transfer on the timeline.
  EXPECT_GE(editor->timeline_bars(), 16 * 15);
  EXPECT_GT(editor->critical_bars(), 0);
  editor->set_timeline_rows_by_link(true);
  EXPECT_GE(editor->timeline_bars(), 16 * 15);  // a bar per link of each route
  EXPECT_TRUE(window.topology_view()->colours_utilisation());
}

TEST_F(GuiTest, ExplorationStartsPausesResumesStopsAndResumesTheRun) {
  MainWindow window(db_, "a100x1");
  ExplorationView* view = window.exploration_view();
  view->set_sizes("1M,64M");
  view->set_budget(100000);
  view->start();
  EXPECT_EQ(view->state(), ExplorationView::State::running);
  ASSERT_TRUE(wait_for([&] { return view->leaderboard()->rowCount() == 2; }));
  view->pause();
  EXPECT_EQ(view->state(), ExplorationView::State::paused);
  const db::Id run = view->run_id();
  ASSERT_GT(run, 0);
  QTest::qWait(300);  // the batch in flight lands
  const auto paused_at = db::Store::open(db_).run_stats(run).candidates;
  QTest::qWait(500);
  EXPECT_EQ(db::Store::open(db_).run_stats(run).candidates, paused_at);
  EXPECT_EQ(db::Store::open(db_).run(run)->status, "running");
  view->resume();
  EXPECT_EQ(view->state(), ExplorationView::State::running);
  ASSERT_TRUE(wait_for([&] { return db::Store::open(db_).run_stats(run).candidates > paused_at; }));
  view->stop();
  ASSERT_TRUE(wait_for([&] { return view->state() == ExplorationView::State::idle; }));
  EXPECT_EQ(db::Store::open(db_).run(run)->status, "interrupted");
  EXPECT_TRUE(view->finished_message().contains("interrupted"))
      << view->finished_message().toStdString();
  EXPECT_EQ(view->chart()->chart()->series().size(), 2);  // one line per size
  EXPECT_GT(points_in(view->chart()), 0);
  // Resume continues the stored run.
  const auto stopped_at = db::Store::open(db_).run_stats(run).candidates;
  view->resume();
  ASSERT_TRUE(
      wait_for([&] { return db::Store::open(db_).run_stats(run).candidates > stopped_at; }));
  view->stop();
  ASSERT_TRUE(wait_for([&] { return view->state() == ExplorationView::State::idle; }));
  EXPECT_EQ(view->run_id(), run);
  // Double-click on the leaderboard opens the program in the editor.
  const QString source = view->leaderboard()->item(0, 5)->data(Qt::UserRole).toString();
  Q_EMIT view->leaderboard()->cellDoubleClicked(0, 5);
  EXPECT_EQ(window.editor_view()->program(), source);
  EXPECT_EQ(window.tabs()->currentWidget(), window.editor_view());
}

TEST_F(GuiTest, ComparisonShowsTheStoredStudyAndExportsIt) {
  MainWindow window(db_, kTopology);
  ComparisonView* view = window.comparison_view();
  ASSERT_TRUE(view->comparison().has_value());
  const explore::Comparison& c = *view->comparison();
  ASSERT_EQ(c.contenders.size(), 3u);
  // One row per size, a column per contender after the size and the bound.
  ASSERT_EQ(view->table()->rowCount(), 4);
  ASSERT_EQ(view->table()->columnCount(), 2 + 3);
  EXPECT_EQ(view->table()->horizontalHeaderItem(2)->text(),
            QString::fromStdString(c.contenders[0].name));
  EXPECT_EQ(view->table()->item(0, 0)->text(),
            QString::fromStdString(support::format_size(c.sizes[0])));
  int bold = 0;
  for (int column = 2; column < 5; ++column)
    bold += view->table()->item(3, column)->font().bold() ? 1 : 0;
  EXPECT_EQ(bold, 1);                                     // the fastest at that size
  EXPECT_EQ(view->chart()->chart()->series().size(), 4);  // contenders and the bound
  EXPECT_EQ(c.ranks, 16);
  EXPECT_EQ(c.nccl_us.size(), 4u);
  const QString base = QDir(dir_->path()).filePath("cmp");
  view->export_csv(base + ".csv");
  view->export_svg(base + ".svg");
  view->export_png(base + ".png");
  const std::string csv = support::read_text_file((base + ".csv").toStdString());
  EXPECT_EQ(csv, explore::comparison_csv(c));
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 1 + 3 * 4);
  EXPECT_TRUE(support::read_text_file((base + ".svg").toStdString()).starts_with("<svg"));
  EXPECT_FALSE(QImage(base + ".png").isNull());
}

TEST_F(GuiTest, ComparisonRunsCompareOnAWorkerAndStoresIt) {
  MainWindow window(db_, kTopology);
  ComparisonView* view = window.comparison_view();
  const auto before = db::Store::open(db_).comparisons().size();
  view->set_contenders({"nccl", "nccl-ring"});
  view->set_sizes("1M,16M");
  view->run();
  EXPECT_TRUE(view->busy());
  ASSERT_TRUE(wait_for([&] { return !view->busy(); }));
  EXPECT_EQ(db::Store::open(db_).comparisons().size(), before + 1);
  EXPECT_EQ(view->table()->rowCount(), 2);
  EXPECT_EQ(view->table()->columnCount(), 2 + 2);
  EXPECT_EQ(view->comparison()->contenders.front().name, "nccl");
}

TEST_F(GuiTest, HistoryFiltersRunsAndShowsLineageAndAMetricOverTime) {
  MainWindow window(db_, kTopology);
  HistoryView* view = window.history_view();
  db::HistoryFilter filter;
  filter.topology = kTopology;
  const auto runs = db::list_runs(db::Store::open(db_), filter);
  EXPECT_EQ(view->runs()->rowCount(), static_cast<int>(runs.size()));
  view->set_filter("ring8", "", "");
  EXPECT_EQ(view->runs()->rowCount(), 0);
  view->set_filter(kTopology, "allgather", "llm");
  EXPECT_EQ(view->runs()->rowCount(), 0);
  view->set_filter(kTopology, "allgather", "offline");
  ASSERT_EQ(view->runs()->rowCount(), static_cast<int>(runs.size()));
  view->select_run(0);
  EXPECT_EQ(view->programs()->rowCount(), 4);  // best per size
  EXPECT_TRUE(view->lineage()->toHtml().contains("Program #"));
  EXPECT_TRUE(view->lineage()->toPlainText().contains("Results"));
  EXPECT_EQ(view->metric_chart()->chart()->series().size(), 2);
  EXPECT_GT(points_in(view->metric_chart()), 0);
  // A program with parents lists them.
  const auto candidates = db::Store::open(db_).candidates(runs.front().run.id);
  for (const auto& c : candidates)
    if (auto p = db::Store::open(db_).program(c.program_id); p && !p->parents.empty()) {
      view->show_program(p->id);
      EXPECT_TRUE(view->lineage()->toPlainText().contains("parent")) << p->id;
      break;
    }
}

TEST_F(GuiTest, HistoryListsStoredCalibrationsNewestFirst) {
  QTemporaryDir dir;
  const std::string path = QDir(dir.path()).filePath("calibrated.db").toStdString();
  {
    db::Store store = db::Store::open(path);
    db::CalibrationRecord c;
    c.backend = "mpi";
    c.ranks = 4;
    c.topology_name = "calibrated-mpi4";
    c.topology_json = R"({"name":"calibrated-mpi4","nodes":[],"links":[]})";
    c.checked = true;
    c.median_error_before = 0.914;
    c.worst_error_before = 0.95;
    c.median_error_after = 0.399;
    c.worst_error_after = 1.694;
    store.record_calibration(c);
    c.host = "node7";
    c.checked = false;
    store.record_calibration(c);
  }
  MainWindow window(path, kTopology);
  QTableWidget* table = window.history_view()->calibrations();
  ASSERT_EQ(table->rowCount(), 2);
  EXPECT_EQ(table->item(0, 1)->text(), "node7");
  EXPECT_EQ(table->item(0, 5)->text(), "not checked");
  EXPECT_EQ(table->item(1, 2)->text(), "mpi");
  EXPECT_EQ(table->item(1, 3)->text(), "4");
  EXPECT_EQ(table->item(1, 4)->text(), "calibrated-mpi4");
  EXPECT_EQ(table->item(1, 5)->text(), "91.4% / 95.0%");
  EXPECT_EQ(table->item(1, 6)->text(), "39.9% / 169.4%");
}

TEST_F(GuiTest, ViewsKeepWorkingWhileTheCliExploresIntoTheSameDatabase) {
  MainWindow window(db_, kTopology);
  const int before = window.history_view()->runs()->rowCount();
  QProcess cli;
  cli.start(OPTIFLOW_BINARY,
            {"explore", "--topo", kTopology, "--sizes", kSizes, "--budget", "48", "--seed", "7",
             "--db", QString::fromStdString(db_), "--out", QDir(dir_->path()).filePath("cli-out")});
  ASSERT_TRUE(cli.waitForStarted());
  int refreshes = 0;
  while (cli.state() != QProcess::NotRunning) {
    window.history_view()->refresh();
    window.exploration_view()->set_context(window.context());
    ++refreshes;
    QTest::qWait(50);
  }
  ASSERT_EQ(cli.exitCode(), 0) << cli.readAllStandardError().toStdString();
  EXPECT_GT(refreshes, 0);
  window.history_view()->refresh();
  EXPECT_EQ(window.history_view()->runs()->rowCount(), before + 1);
}

TEST_F(GuiTest, ScreenshotsWriteOnePngPerViewAtTheDefaultSize) {
  MainWindow window(db_, kTopology);
  const QString dir = QDir(dir_->path()).filePath("shots");
  const QStringList written = window.save_screenshots(dir);
  ASSERT_EQ(written.size(), 5);
  for (const char* name : {"topology", "editor", "exploration", "comparison", "history"}) {
    const QImage image(QDir(dir).filePath(QString(name) + ".png"));
    ASSERT_FALSE(image.isNull()) << name;
    EXPECT_EQ(image.width(), window.width());
  }
  EXPECT_NE(window.editor_view()->last_simulation(), nullptr);
}

TEST_F(GuiTest, OptiflowGuiScreenshotRunsOffscreenFromTheCommandLine) {
  const QString dir = QDir(dir_->path()).filePath("cli-shots");
  QProcess gui;
  gui.start(OPTIFLOW_BINARY,
            {"gui", "--db", QString::fromStdString(db_), "--topo", kTopology, "--screenshot", dir});
  ASSERT_TRUE(gui.waitForFinished(300000));
  ASSERT_EQ(gui.exitCode(), 0) << gui.readAllStandardError().toStdString();
  EXPECT_EQ(QDir(dir).entryList({"*.png"}).size(), 5);
}

}  // namespace
}  // namespace optiflow::gui

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (::testing::GTEST_FLAG(list_tests)) return RUN_ALL_TESTS();  // discovery needs no Qt
  if (!std::getenv("QT_QPA_PLATFORM")) setenv("QT_QPA_PLATFORM", "offscreen", 1);
  QApplication app(argc, argv);
  return RUN_ALL_TESTS();
}
