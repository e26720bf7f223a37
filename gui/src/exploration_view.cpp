#include <QChartView>
#include <QComboBox>
#include <QDir>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QLineSeries>
#include <QProgressBar>
#include <QPushButton>
#include <QSpinBox>
#include <QSplitter>
#include <QTableWidget>
#include <QThread>
#include <QVBoxLayout>
#include <QValueAxis>
#include <algorithm>

#include "charts.hpp"
#include "optiflow/db/history.hpp"
#include "optiflow/gui/views.hpp"
#include "optiflow/llm/llm_proposer.hpp"
#include "optiflow/llm/settings.hpp"
#include "optiflow/propose/proposer.hpp"
#include "optiflow/support/error.hpp"
#include "optiflow/support/sizes.hpp"

namespace optiflow::gui {
namespace {

constexpr std::size_t kSizesCharted = 5;  // lines in the chart: more would not be readable

// The proposers `optiflow explore --proposer` offers; the model's settings come from the
// environment and OPTIFLOW_LLM_* as for the CLI without flags.
propose::ProposerFactory proposer_factory(const std::string& db_path) {
  return [db_path](const std::string& name,
                   const propose::ProposalContext& context) -> std::unique_ptr<propose::Proposer> {
    if (name == "offline") return propose::make_offline_proposer(context);
    llm::LlmSettings settings = llm::load_settings("");
    llm::validate(settings);
    auto model = llm::make_llm_proposer(context, settings, db_path);
    if (name == "llm") return model;
    return propose::make_hybrid_proposer(std::move(model), propose::make_offline_proposer(context));
  };
}

QString one_line(const std::string& program) {
  QString text = QString::fromStdString(program).simplified();
  return text.size() > 90 ? text.left(87) + "..." : text;
}

}  // namespace

ExplorationView::ExplorationView(QWidget* parent) : QWidget(parent) {
  sizes_ = new QLineEdit(support::kDefaultSizes, this);
  proposer_ = new QComboBox(this);
  proposer_->addItems({"offline", "llm", "hybrid"});
  budget_ = new QSpinBox(this);
  budget_->setRange(1, 1000000);
  budget_->setValue(200);
  start_ = new QPushButton(tr("Start"), this);
  pause_ = new QPushButton(tr("Pause"), this);
  resume_ = new QPushButton(tr("Resume"), this);
  stop_ = new QPushButton(tr("Stop"), this);
  bar_ = new QProgressBar(this);
  status_ = new QLabel(this);
  status_->setWordWrap(true);
  auto* form = new QFormLayout();
  form->addRow(tr("Sizes per rank"), sizes_);
  form->addRow(tr("Proposer"), proposer_);
  form->addRow(tr("Budget (candidates)"), budget_);
  auto* buttons = new QHBoxLayout();
  for (QPushButton* b : {start_, pause_, resume_, stop_}) buttons->addWidget(b);
  auto* controls = new QWidget(this);
  auto* controls_layout = new QVBoxLayout(controls);
  controls_layout->addWidget(new QLabel(tr("Exploration on the toolbar's topology and collective "
                                           "(optiflow explore)"),
                                        controls));
  controls_layout->addLayout(form);
  controls_layout->addLayout(buttons);
  controls_layout->addWidget(bar_);
  controls_layout->addWidget(status_);
  controls_layout->addStretch();

  chart_ = make_chart_view(tr("Best time / lower bound"), this);
  leaderboard_ = new QTableWidget(0, 6, this);
  leaderboard_->setHorizontalHeaderLabels({tr("size"), tr("program"), tr("busbw (GB/s)"),
                                           tr("x bound"), tr("run"), tr("program text")});
  leaderboard_->horizontalHeader()->setStretchLastSection(true);
  leaderboard_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  leaderboard_->setSelectionBehavior(QAbstractItemView::SelectRows);
  leaderboard_->verticalHeader()->setVisible(false);
  leaderboard_->setToolTip(tr("Best program per size; double-click opens it in the editor"));

  auto* top = new QSplitter(Qt::Horizontal, this);
  top->addWidget(controls);
  top->addWidget(chart_);
  top->setStretchFactor(1, 3);
  auto* split = new QSplitter(Qt::Vertical, this);
  split->addWidget(top);
  auto* board = new QWidget(this);
  auto* board_layout = new QVBoxLayout(board);
  board_layout->setContentsMargins(0, 0, 0, 0);
  board_layout->addWidget(new QLabel(tr("Leaderboard: the best program per size (double-click "
                                        "opens it in the editor)"),
                                     board));
  board_layout->addWidget(leaderboard_);
  split->addWidget(board);
  auto* layout = new QVBoxLayout(this);
  layout->addWidget(split);

  connect(start_, &QPushButton::clicked, this, &ExplorationView::start);
  connect(pause_, &QPushButton::clicked, this, &ExplorationView::pause);
  connect(resume_, &QPushButton::clicked, this, &ExplorationView::resume);
  connect(stop_, &QPushButton::clicked, this, &ExplorationView::stop);
  connect(leaderboard_, &QTableWidget::cellDoubleClicked, this, [this](int row, int) {
    Q_EMIT open_program(leaderboard_->item(row, 5)->data(Qt::UserRole).toString());
  });
  set_state(State::idle);
}

ExplorationView::~ExplorationView() {
  {
    std::lock_guard lock(mutex_);
    stop_requested_ = true;
    paused_ = false;
  }
  wake_.notify_all();
  if (worker_.joinable()) worker_.join();
}

void ExplorationView::set_context(const Context& context) {
  context_ = context;
  if (state_ != State::idle) return;
  // Idle: show the newest stored run of this topology and collective.
  try {
    db::HistoryFilter filter;
    filter.topology = context.topology;
    filter.collective = std::string(support::to_string(context.collective));
    const auto runs = db::Store::open(context.db_path).runs(filter);
    if (!runs.empty()) {
      show_run(runs.back().id);
      return;
    }
  } catch (const db::DbError& e) {
    status_->setText(QString::fromStdString(e.what()));
  }
  run_id_ = 0;
  chart_->chart()->removeAllSeries();
  leaderboard_->setRowCount(0);
  status_->setText(
      tr("No run for %1 yet: press Start.").arg(QString::fromStdString(context.topology)));
}

void ExplorationView::set_budget(int candidates) {
  budget_->setValue(candidates);
}
void ExplorationView::set_sizes(const QString& sizes) {
  sizes_->setText(sizes);
}
void ExplorationView::set_proposer(const QString& name) {
  proposer_->setCurrentText(name);
}
QString ExplorationView::finished_message() const {
  return message_;
}

void ExplorationView::set_state(State state) {
  state_ = state;
  start_->setEnabled(state == State::idle);
  pause_->setEnabled(state == State::running);
  resume_->setEnabled(state == State::paused || (state == State::idle && run_id_ > 0));
  stop_->setEnabled(state == State::running || state == State::paused);
  for (QWidget* w : std::initializer_list<QWidget*>{sizes_, proposer_, budget_})
    w->setEnabled(state == State::idle);
}

void ExplorationView::start() {
  if (state_ != State::idle) return;
  explore::ExploreOptions options;
  try {
    options.sizes = support::parse_sizes(sizes_->text().toStdString());
  } catch (const support::InputError& e) {
    status_->setText(QString::fromStdString(e.what()));
    return;
  }
  options.topology = context_.topology;
  options.collective = context_.collective;
  options.budget = budget_->value();
  options.proposer = proposer_->currentText().toStdString();
  options.db_path = context_.db_path;
  options.out_dir = QDir(QDir::tempPath()).filePath("optiflow-gui-out").toStdString();
  // One core stays with the window.
  options.threads = std::max(1, QThread::idealThreadCount() - 1);
  if (state_ == State::idle && resume_requested_) options.resume = run_id_;
  resume_requested_ = false;
  stop_requested_ = false;
  paused_ = false;
  message_.clear();
  bar_->setRange(0, static_cast<int>(options.budget));
  bar_->setValue(0);
  status_->setText(options.resume ? tr("resuming run %1...").arg(*options.resume)
                                  : tr("starting..."));
  options.should_stop = [this] { return stop_requested_.load(); };
  if (worker_.joinable()) worker_.join();
  set_state(State::running);
  worker_ = std::thread([this, options] {
    QString message;
    try {
      const auto result = explore::explore(
          options, proposer_factory(options.db_path), [this](const explore::Progress& p) {
            QMetaObject::invokeMethod(
                this, [this, p] { progress(p); }, Qt::QueuedConnection);
            std::unique_lock lock(mutex_);
            wake_.wait(lock, [this] { return !paused_ || stop_requested_; });
          });
      message = tr("run %1: %2 candidates (%3 compiled) in %4 s")
                    .arg(result.run_id)
                    .arg(result.candidates)
                    .arg(result.compiled)
                    .arg(result.seconds, 0, 'f', 1);
      if (!result.failure.empty())
        message += tr("; failed: %1").arg(QString::fromStdString(result.failure));
      if (!result.stop_reason.empty())
        message += tr("; stopped: %1").arg(QString::fromStdString(result.stop_reason));
      if (result.candidates < options.budget && result.failure.empty() &&
          result.stop_reason.empty())
        message += tr("; interrupted (Resume continues it)");
    } catch (const std::exception& e) {
      message = tr("exploration failed: %1").arg(QString::fromStdString(e.what()));
    }
    QMetaObject::invokeMethod(
        this, [this, message] { finished(message); }, Qt::QueuedConnection);
  });
}

void ExplorationView::pause() {
  if (state_ != State::running) return;
  {
    std::lock_guard lock(mutex_);
    paused_ = true;
  }
  set_state(State::paused);
  status_->setText(tr("paused after the current batch"));
}

void ExplorationView::resume() {
  if (state_ == State::idle && run_id_ > 0) {  // continue a stored run (--resume)
    resume_requested_ = true;
    start();
    return;
  }
  if (state_ != State::paused) return;
  {
    std::lock_guard lock(mutex_);
    paused_ = false;
  }
  wake_.notify_all();
  set_state(State::running);
  status_->setText(tr("running"));
}

void ExplorationView::stop() {
  if (state_ != State::running && state_ != State::paused) return;
  {
    std::lock_guard lock(mutex_);
    stop_requested_ = true;
  }
  wake_.notify_all();
  set_state(State::stopping);
  status_->setText(tr("stopping after the current batch..."));
}

void ExplorationView::progress(const explore::Progress& p) {
  bar_->setValue(static_cast<int>(p.done));
  if (state_ == State::running)
    status_->setText(tr("run %1: %2 of %3 candidates, %4 s")
                         .arg(p.run_id)
                         .arg(p.done)
                         .arg(p.budget)
                         .arg(p.seconds, 0, 'f', 1));
  show_run(p.run_id);
}

void ExplorationView::finished(const QString& message) {
  if (worker_.joinable()) worker_.join();
  message_ = message;
  set_state(State::idle);
  status_->setText(message);
  if (run_id_ > 0) show_run(run_id_);
  set_state(State::idle);
  Q_EMIT run_finished(run_id_);
}

void ExplorationView::show_run(db::Id run_id) {
  std::optional<db::RunDetail> detail;
  try {
    const db::Store store = db::Store::open(context_.db_path);
    detail = db::run_detail(store, run_id);
    if (!detail) return;
    run_id_ = run_id;
    // The leaderboard: the best program per size, as `optiflow history run` lists it.
    leaderboard_->setRowCount(static_cast<int>(detail->best.size()));
    for (std::size_t i = 0; i < detail->best.size(); ++i) {
      const db::BestEntry& b = detail->best[i];
      const auto program = store.program(b.program_id);
      const std::string source = program ? program->source : std::string();
      const int row = static_cast<int>(i);
      auto set = [&](int column, const QString& text) {
        leaderboard_->setItem(row, column, new QTableWidgetItem(text));
      };
      set(0, size_label(b.size_bytes));
      set(1, QString("#%1").arg(b.program_id));
      set(2, QString::number(b.perf.busbw_GBps, 'f', 2));
      set(3, QString::number(b.perf.bound_us > 0 ? b.perf.time_us / b.perf.bound_us : 0, 'f', 3));
      set(4, QString::number(b.run_id));
      set(5, one_line(source));
      leaderboard_->item(row, 5)->setData(Qt::UserRole, QString::fromStdString(source));
    }
    leaderboard_->resizeColumnsToContents();
  } catch (const db::DbError& e) {
    status_->setText(QString::fromStdString(e.what()));
    return;
  }
  if (state_ == State::idle)
    status_->setText(tr("run %1 (%2, %3 of %4 candidates, %5)")
                         .arg(run_id)
                         .arg(QString::fromStdString(detail->run.proposer))
                         .arg(detail->stats.candidates)
                         .arg(detail->run.budget)
                         .arg(QString::fromStdString(detail->run.status)) +
                     (message_.isEmpty() ? QString() : "\n" + message_));
  set_state(state_);

  // The chart: per size shown, the best time over the bound after each iteration.
  QChart* chart = chart_->chart();
  chart->removeAllSeries();
  for (QAbstractAxis* axis : chart->axes()) {
    chart->removeAxis(axis);
    delete axis;
  }
  chart->setTitle(tr("Run %1 on %2: best time / lower bound per size")
                      .arg(run_id)
                      .arg(QString::fromStdString(detail->run.topology_name)));
  const std::vector<std::uint64_t>& sizes = detail->run.sizes;
  std::vector<double> bound(sizes.size(), 0);
  for (const db::BestEntry& b : detail->best)
    for (std::size_t s = 0; s < sizes.size(); ++s)
      if (sizes[s] == b.size_bytes) bound[s] = b.perf.bound_us;
  std::vector<std::size_t> shown;
  for (std::size_t k = 0; k < kSizesCharted && !sizes.empty(); ++k) {
    const std::size_t s = sizes.size() == 1 ? 0 : k * (sizes.size() - 1) / (kSizesCharted - 1);
    if (shown.empty() || shown.back() != s) shown.push_back(s);
  }
  auto* x = new QValueAxis();
  x->setTitleText(tr("candidates evaluated"));
  x->setLabelFormat("%d");
  auto* y = new QValueAxis();
  y->setTitleText(tr("best time / lower bound (x)"));
  chart->addAxis(x, Qt::AlignBottom);
  chart->addAxis(y, Qt::AlignLeft);
  double top = 1, right = 1;
  for (std::size_t k = 0; k < shown.size(); ++k) {
    const std::size_t s = shown[k];
    auto* series = new QLineSeries();
    series->setName(size_label(sizes[s]));
    series->setPen(QPen(series_colour(static_cast<int>(k)), 2));
    for (const db::ProgressRow& row : detail->progress)
      if (s < row.best_time_us.size() && row.best_time_us[s] && bound[s] > 0) {
        const double ratio = *row.best_time_us[s] / bound[s];
        series->append(static_cast<double>(row.candidates), ratio);
        top = std::max(top, ratio);
        right = std::max(right, static_cast<double>(row.candidates));
      }
    chart->addSeries(series);
    series->attachAxis(x);
    series->attachAxis(y);
  }
  x->setRange(0, right);
  y->setRange(1, std::min(top, 10.0) * 1.05 + 0.05);
  y->applyNiceNumbers();
}

}  // namespace optiflow::gui
