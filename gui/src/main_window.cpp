#include "optiflow/gui/main_window.hpp"

#include <QApplication>
#include <QComboBox>
#include <QDateTime>
#include <QDir>
#include <QElapsedTimer>
#include <QLabel>
#include <QStatusBar>
#include <QTabWidget>
#include <QThread>
#include <QToolBar>

#include "optiflow/db/history.hpp"

namespace optiflow::gui {
namespace {

constexpr int kDefaultWidth = 1440, kDefaultHeight = 900;

std::string newest_topology(const std::string& db_path) {
  try {
    const auto runs = db::Store::open(db_path).runs();
    if (!runs.empty()) return runs.back().topology_name;
  } catch (const db::DbError&) {
  }
  return "a100x4";
}

}  // namespace

MainWindow::MainWindow(const std::string& db_path, const std::string& topology) {
  context_.db_path = db_path;
  context_.topology = topology.empty() ? newest_topology(db_path) : topology;
  setWindowTitle(tr("OptiFlow - %1").arg(QString::fromStdString(db_path)));
  resize(kDefaultWidth, kDefaultHeight);

  auto* bar = addToolBar(tr("Context"));
  bar->setMovable(false);
  bar->addWidget(new QLabel(tr(" Topology: "), bar));
  auto* topo = new QComboBox(bar);
  topo->setEditable(true);
  topo->setMinimumWidth(180);
  for (const std::string& name : known_topologies(db_path))
    topo->addItem(QString::fromStdString(name));
  topo->setCurrentText(QString::fromStdString(context_.topology));
  topo->setObjectName("topology");
  bar->addWidget(topo);
  bar->addWidget(new QLabel(tr("  Collective: "), bar));
  auto* collective = new QComboBox(bar);
  collective->addItems({"allgather", "reducescatter", "allreduce"});
  collective->setObjectName("collective");
  bar->addWidget(collective);
  bar->addWidget(new QLabel(tr("  Database: %1").arg(QString::fromStdString(db_path)), bar));

  tabs_ = new QTabWidget(this);
  topology_ = new TopologyView(tabs_);
  editor_ = new EditorView(tabs_);
  exploration_ = new ExplorationView(tabs_);
  comparison_ = new ComparisonView(tabs_);
  history_ = new HistoryView(tabs_);
  tabs_->addTab(topology_, tr("Topology"));
  tabs_->addTab(editor_, tr("Editor"));
  tabs_->addTab(exploration_, tr("Exploration"));
  tabs_->addTab(comparison_, tr("Comparison"));
  tabs_->addTab(history_, tr("History"));
  setCentralWidget(tabs_);
  statusBar()->showMessage(tr("Ready"));

  // Picked from the list or entered (Enter): not on every keystroke of a file name.
  connect(topo, &QComboBox::textActivated, this, [this](const QString& name) {
    if (name.isEmpty()) return;
    context_.topology = name.toStdString();
    apply_context();
  });
  connect(collective, &QComboBox::currentTextChanged, this, [this](const QString& name) {
    context_.collective = *support::collective_from_string(name.toStdString());
    apply_context();
  });
  auto open_in_editor = [this](const QString& source) {
    editor_->set_program(source);
    tabs_->setCurrentWidget(editor_);
  };
  connect(exploration_, &ExplorationView::open_program, this, open_in_editor);
  connect(history_, &HistoryView::open_program, this, open_in_editor);
  connect(editor_, &EditorView::simulated, this,
          [this](const QString& topology, const std::vector<sim::LinkUsage>& usage,
                 const QString& what) {
            topology_->show_utilisation(topology.toStdString(), usage, what);
          });
  connect(exploration_, &ExplorationView::run_finished, this,
          [this](qint64) { history_->refresh(); });
  apply_context();
}

MainWindow::~MainWindow() {
  for (QComboBox* box : findChildren<QComboBox*>()) box->disconnect(this);
}

void MainWindow::set_topology(const QString& name) {
  findChild<QComboBox*>("topology")->setCurrentText(name);
  context_.topology = name.toStdString();
  apply_context();
}

void MainWindow::apply_context() {
  topology_->set_context(context_);
  editor_->set_context(context_);
  exploration_->set_context(context_);
  comparison_->set_context(context_);
  history_->set_context(context_);
}

bool MainWindow::wait_idle(int timeout_ms) {
  QElapsedTimer clock;
  clock.start();
  auto busy = [&] { return editor_->busy() || exploration_->busy() || comparison_->busy(); };
  while (busy() && clock.elapsed() < timeout_ms) {
    QApplication::processEvents(QEventLoop::AllEvents, 50);
    QThread::msleep(10);
  }
  QApplication::processEvents();
  return !busy();
}

QStringList MainWindow::save_screenshots(const QString& dir) {
  QDir().mkpath(dir);
  // The editor shows the best stored program for this topology, simulated.
  try {
    const db::Store store = db::Store::open(context_.db_path);
    db::HistoryFilter filter;
    filter.topology = context_.topology;
    filter.collective = std::string(support::to_string(context_.collective));
    const auto best = db::best_across_runs(store, filter);
    if (!best.empty()) {
      const db::BestEntry& top = best[best.size() * 3 / 4];
      if (auto program = store.program(top.program_id))
        editor_->set_program(QString::fromStdString(program->source));
    }
  } catch (const db::DbError&) {
  }
  if (editor_->program().isEmpty()) editor_->set_program("ring over all\n");
  wait_idle();
  editor_->simulate();
  wait_idle();
  history_->select_run(0);
  QStringList written;
  const char* names[] = {"topology", "editor", "exploration", "comparison", "history"};
  show();
  for (int i = 0; i < tabs_->count(); ++i) {
    tabs_->setCurrentIndex(i);
    wait_idle();
    QApplication::processEvents();
    const QString path = QDir(dir).filePath(QString(names[i]) + ".png");
    if (grab().save(path)) written << path;
  }
  return written;
}

}  // namespace optiflow::gui
