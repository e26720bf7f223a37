#include <QChartView>
#include <QComboBox>
#include <QFutureWatcher>
#include <QGraphicsRectItem>
#include <QGraphicsScene>
#include <QGraphicsSimpleTextItem>
#include <QGraphicsView>
#include <QHBoxLayout>
#include <QLabel>
#include <QListWidget>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QRegularExpression>
#include <QScrollBar>
#include <QSplitter>
#include <QSyntaxHighlighter>
#include <QTimer>
#include <QVBoxLayout>
#include <QWheelEvent>
#include <QtConcurrent/QtConcurrentRun>
#include <cmath>
#include <map>
#include <set>

#include "charts.hpp"
#include "optiflow/baselines/baseline.hpp"
#include "optiflow/compiler/compiler.hpp"
#include "optiflow/dsl/parser.hpp"
#include "optiflow/gui/views.hpp"
#include "optiflow/support/error.hpp"
#include "optiflow/support/sizes.hpp"
#include "optiflow/topology/topology_io.hpp"

namespace optiflow::gui {
namespace {

constexpr int kCompilePauseMs = 400;  // typing pause before a compile starts
constexpr int kMaxTimelineBars = 20000;
constexpr double kTimelineWidth = 1000;  // scene pixels for the whole collective
constexpr double kBarHeight = 12, kRowHeight = 16, kLabelWidth = 110;
const char* const kSimSizes = support::kDefaultSizes;
const char* const kBaselines[] = {"nccl-ring", "nccl-tree"};  // beside NCCL's tuner's pick

// The DSL's keywords (docs/dsl.md, Grammar), its numbers, @nodes and comments.
class DslHighlighter : public QSyntaxHighlighter {
 public:
  explicit DslHighlighter(QTextDocument* document) : QSyntaxHighlighter(document) {
    QTextCharFormat keyword, pattern, number, node, comment, protocol;
    pattern.setForeground(QColor(0, 70, 160));
    pattern.setFontWeight(QFont::Bold);
    keyword.setForeground(QColor(120, 40, 140));
    keyword.setFontWeight(QFont::Bold);
    number.setForeground(QColor(160, 80, 0));
    node.setForeground(QColor(0, 120, 60));
    protocol.setForeground(QColor(180, 0, 90));
    comment.setForeground(QColor(120, 120, 120));
    comment.setFontItalic(true);
    rules_ = {
        {QRegularExpression(
             R"(\b(ring|chain|direct|binomial|bruck|rd|binary|kary|dbtree|scatter|bfs|pack)\b)"),
         pattern},
        {QRegularExpression(
             R"(\b(over|where|by|reverse|all|hosts|rails|under|split|as|weight|let|route|via|avoid|pipeline|channels|protocol)\b)"),
         keyword},
        {QRegularExpression(R"(\b(LL128|LL|Simple)\b)"), protocol},
        {QRegularExpression(R"(\b\d+(\.\d+)?\b)"), number},
        {QRegularExpression(R"(@("[^"]*"|[A-Za-z0-9_.\-]+))"), node},
        {QRegularExpression(R"(#.*$)"), comment},
    };
  }

 protected:
  void highlightBlock(const QString& text) override {
    for (const auto& [pattern, format] : rules_)
      for (auto it = pattern.globalMatch(text); it.hasNext();) {
        const auto m = it.next();
        setFormat(static_cast<int>(m.capturedStart()), static_cast<int>(m.capturedLength()),
                  format);
      }
  }

 private:
  std::vector<std::pair<QRegularExpression, QTextCharFormat>> rules_;
};

// Ctrl+wheel zooms the time axis; the row labels keep their size.
class ZoomView : public QGraphicsView {
 public:
  using QGraphicsView::QGraphicsView;

 protected:
  void wheelEvent(QWheelEvent* event) override {
    if (event->modifiers() & Qt::ControlModifier) {
      const double factor = event->angleDelta().y() > 0 ? 1.25 : 0.8;
      scale(factor, 1);
      event->accept();
      return;
    }
    QGraphicsView::wheelEvent(event);
  }
};

struct CompileOutcome {
  int generation = 0;
  QString message;  // empty: compiled
  int line = 0, column = 0;
};

CompileOutcome compile_text(int generation, const std::string& text,
                            std::shared_ptr<const topology::Topology> topo,
                            support::Collective collective) {
  CompileOutcome out;
  out.generation = generation;
  if (!topo) {
    out.message = "no topology";
    return out;
  }
  try {
    compiler::CompileOptions options;
    options.collective = collective;
    options.time_limit_s = 10;
    compiler::compile_program(text, "editor", *topo, options);
  } catch (const support::InputError& e) {  // DslError too: it carries the place
    out.message = QString::fromStdString(e.what());
    out.line = e.where().line;
    out.column = e.where().column;
  } catch (const compiler::TimeLimitError& e) {
    out.message = QString::fromStdString(e.what());
  } catch (const std::exception& e) {
    out.message = QString::fromStdString(std::string("internal error: ") + e.what());
  }
  return out;
}

// A result per size from its time alone (the bound, NCCL's pick).
std::vector<support::SizeResult> results_of(const std::vector<double>& time_us,
                                            const explore::Reference& reference,
                                            const topology::Topology& t,
                                            support::Collective collective) {
  std::vector<support::SizeResult> results;
  for (std::size_t s = 0; s < time_us.size(); ++s)
    results.push_back(
        support::size_result(collective, t.rank_count(), reference.sizes[s], time_us[s]));
  return results;
}

// NCCL's tuner's pick (from the reference) and its fixed algorithms, where they build.
std::vector<Simulation::Baseline> baselines(const explore::Reference& reference,
                                            const topology::Topology& t,
                                            support::Collective collective) {
  std::vector<Simulation::Baseline> curves;
  if (!reference.nccl.empty()) {
    std::vector<double> nccl_us;
    for (const propose::NcclAtSize& pick : reference.nccl) nccl_us.push_back(pick.time_us);
    curves.push_back({"nccl", results_of(nccl_us, reference, t, collective)});
  }
  for (const char* name : kBaselines) {
    try {
      const auto run = baselines::run_baseline(name, t, collective, reference.sizes);
      Simulation::Baseline b{name, {}};
      for (const auto& row : run.rows) b.results.push_back(row.sim);
      curves.push_back(std::move(b));
    } catch (const support::UnsupportedError&) {
      // This baseline does not build here (collective or topology): no curve for it.
    }
  }
  return curves;
}

std::vector<double> busbw_of(const std::vector<support::SizeResult>& results) {
  std::vector<double> busbw;
  for (const support::SizeResult& r : results) busbw.push_back(r.busbw_GBps);
  return busbw;
}

std::shared_ptr<Simulation> simulate_text(const std::string& text,
                                          std::shared_ptr<const topology::Topology> topo,
                                          support::Collective collective,
                                          std::uint64_t timeline_size) {
  auto result = std::make_shared<Simulation>();
  try {
    const topology::Topology& t = *topo;
    result->topology = t.name();
    compiler::CompileOptions options;
    options.collective = collective;
    result->schedule = compiler::compile_program(text, "editor", t, options).schedule;
    result->reference = explore::Reference::compute(t, collective, support::parse_sizes(kSimSizes));
    const std::vector<sim::SimResult> swept =
        explore::sweep(sim::Simulator(t, result->schedule), result->reference);
    result->results.assign(swept.begin(), swept.end());
    result->bound = results_of(result->reference.bound_us, result->reference, t, collective);
    result->baselines = baselines(result->reference, t, collective);
    sim::SimOptions detail;
    detail.record_timeline = true;
    result->detail = sim::Simulator(t, result->schedule, detail).run(timeline_size);
    for (topology::LinkId l = 0; l < t.link_count(); ++l)
      result->link_names.push_back(t.node(t.link(l).src).id + "->" + t.node(t.link(l).dst).id);
  } catch (const std::exception& e) {
    result->error = e.what();
  }
  return result;
}

}  // namespace

EditorView::EditorView(QWidget* parent) : QWidget(parent) {
  editor_ = new QPlainTextEdit(this);
  QFont mono("Monospace");
  mono.setStyleHint(QFont::TypeWriter);
  editor_->setFont(mono);
  editor_->setPlaceholderText(tr("ring over all"));
  new DslHighlighter(editor_->document());
  diagnostics_ = new QListWidget(this);
  diagnostics_->setMaximumHeight(90);
  status_ = new QLabel(this);
  status_->setWordWrap(true);
  simulate_button_ = new QPushButton(tr("Simulate"), this);
  timeline_size_ = new QComboBox(this);
  for (const char* size : {"64K", "1M", "16M", "64M", "256M", "1G"}) timeline_size_->addItem(size);
  timeline_size_->setCurrentText("64M");
  timeline_rows_ = new QComboBox(this);
  timeline_rows_->addItems({tr("rows: ranks"), tr("rows: links")});

  auto* left = new QWidget(this);
  auto* left_layout = new QVBoxLayout(left);
  left_layout->setContentsMargins(0, 0, 0, 0);
  left_layout->addWidget(new QLabel(tr("Program (DSL; docs/dsl.md)"), left));
  left_layout->addWidget(editor_, 1);
  left_layout->addWidget(new QLabel(tr("Diagnostics"), left));
  left_layout->addWidget(diagnostics_);
  left_layout->addWidget(status_);
  auto* buttons = new QHBoxLayout();
  buttons->addWidget(simulate_button_);
  buttons->addWidget(new QLabel(tr("timeline at"), left));
  buttons->addWidget(timeline_size_);
  buttons->addWidget(timeline_rows_);
  buttons->addStretch();
  left_layout->addLayout(buttons);

  bandwidth_ = make_chart_view(tr("Bus bandwidth"), this);
  timeline_scene_ = new QGraphicsScene(this);
  timeline_ = new ZoomView(timeline_scene_, this);
  timeline_->setDragMode(QGraphicsView::ScrollHandDrag);
  timeline_->setAlignment(Qt::AlignLeft | Qt::AlignTop);
  auto* zoom_in = new QPushButton(tr("Zoom in"), this);
  auto* zoom_out = new QPushButton(tr("Zoom out"), this);
  auto* zoom_fit = new QPushButton(tr("Fit"), this);
  auto* timeline_box = new QWidget(this);
  auto* timeline_layout = new QVBoxLayout(timeline_box);
  timeline_layout->setContentsMargins(0, 0, 0, 0);
  auto* zoom_row = new QHBoxLayout();
  zoom_row->addWidget(
      new QLabel(tr("Timeline (hover a bar; Ctrl+wheel zooms time)"), timeline_box));
  zoom_row->addStretch();
  zoom_row->addWidget(zoom_in);
  zoom_row->addWidget(zoom_out);
  zoom_row->addWidget(zoom_fit);
  timeline_layout->addLayout(zoom_row);
  timeline_layout->addWidget(timeline_, 1);

  auto* right = new QSplitter(Qt::Vertical, this);
  right->addWidget(bandwidth_);
  right->addWidget(timeline_box);
  auto* split = new QSplitter(Qt::Horizontal, this);
  split->addWidget(left);
  split->addWidget(right);
  split->setStretchFactor(0, 2);
  split->setStretchFactor(1, 3);
  auto* layout = new QVBoxLayout(this);
  layout->addWidget(split);

  compile_timer_ = new QTimer(this);
  compile_timer_->setSingleShot(true);
  compile_timer_->setInterval(kCompilePauseMs);
  connect(compile_timer_, &QTimer::timeout, this, &EditorView::start_compile);
  connect(editor_, &QPlainTextEdit::textChanged, this, &EditorView::schedule_compile);
  connect(simulate_button_, &QPushButton::clicked, this, &EditorView::simulate);
  connect(timeline_rows_, &QComboBox::currentIndexChanged, this, [this] { draw_timeline(); });
  connect(zoom_in, &QPushButton::clicked, this, [this] { timeline_->scale(1.5, 1); });
  connect(zoom_out, &QPushButton::clicked, this, [this] { timeline_->scale(1 / 1.5, 1); });
  connect(zoom_fit, &QPushButton::clicked, this, [this] { timeline_->resetTransform(); });
  draw_bandwidth();
}

EditorView::~EditorView() {
  // Workers hold no pointer to the view, but their watchers must not outlive the futures.
  for (auto* watcher : findChildren<QFutureWatcherBase*>()) watcher->waitForFinished();
}

void EditorView::set_context(const Context& context) {
  context_ = context;
  schedule_compile();
}

void EditorView::set_program(const QString& text) {
  editor_->setPlainText(text);
}
QString EditorView::program() const {
  return editor_->toPlainText();
}

bool EditorView::busy() const {
  return compile_timer_->isActive() || compiling_ > 0 || simulating_;
}

void EditorView::schedule_compile() {
  ++generation_;
  compile_timer_->start();
  status_->setText(tr("editing..."));
}

void EditorView::start_compile() {
  if (editor_->toPlainText().trimmed().isEmpty()) {
    diagnostics_->clear();
    editor_->setExtraSelections({});
    compiled_ok_ = false;
    status_->setText(tr("Type a program, or open one from the exploration or history view."));
    return;
  }
  std::shared_ptr<const topology::Topology> topo;
  try {
    topo = std::make_shared<const topology::Topology>(topology::load_topology(context_.topology));
  } catch (const support::InputError& e) {
    status_->setText(QString::fromStdString(e.what()));
    return;
  }
  ++compiling_;
  auto* watcher = new QFutureWatcher<CompileOutcome>(this);
  connect(watcher, &QFutureWatcher<CompileOutcome>::finished, this, [this, watcher] {
    const CompileOutcome out = watcher->result();
    watcher->deleteLater();
    compile_done(out.generation, out.message, out.line, out.column);
  });
  watcher->setFuture(QtConcurrent::run(
      compile_text, generation_, editor_->toPlainText().toStdString(), topo, context_.collective));
}

void EditorView::compile_done(int generation, const QString& diagnostic, int line, int column) {
  --compiling_;
  if (generation != generation_) return;  // the text changed since: a newer compile follows
  diagnostics_->clear();
  QList<QTextEdit::ExtraSelection> marks;
  compiled_ok_ = diagnostic.isEmpty();
  if (compiled_ok_) {
    status_->setText(
        tr("compiles for %1 (%2)")
            .arg(QString::fromStdString(context_.topology))
            .arg(QString::fromStdString(std::string(support::to_string(context_.collective)))));
  } else {
    diagnostics_->addItem(diagnostic);
    status_->setText(tr("does not compile"));
    if (line > 0) {
      QTextEdit::ExtraSelection mark;
      mark.format.setUnderlineStyle(QTextCharFormat::WaveUnderline);
      mark.format.setUnderlineColor(Qt::red);
      QTextCursor cursor(editor_->document()->findBlockByNumber(line - 1));
      cursor.movePosition(QTextCursor::Right, QTextCursor::MoveAnchor, std::max(0, column - 1));
      cursor.movePosition(QTextCursor::EndOfWord, QTextCursor::KeepAnchor);
      if (!cursor.hasSelection())
        cursor.movePosition(QTextCursor::EndOfBlock, QTextCursor::KeepAnchor);
      if (!cursor.hasSelection()) {  // at the end of a line: mark the character before
        cursor.movePosition(QTextCursor::Left, QTextCursor::KeepAnchor);
      }
      mark.cursor = cursor;
      marks.push_back(mark);
    }
  }
  editor_->setExtraSelections(marks);
}

QStringList EditorView::diagnostics() const {
  QStringList list;
  for (int i = 0; i < diagnostics_->count(); ++i) list << diagnostics_->item(i)->text();
  return list;
}

int EditorView::underlined() const {
  return static_cast<int>(editor_->extraSelections().size());
}

void EditorView::set_timeline_rows_by_link(bool by_link) {
  timeline_rows_->setCurrentIndex(by_link ? 1 : 0);
}

void EditorView::simulate() {
  if (simulating_) return;
  std::shared_ptr<const topology::Topology> topo;
  try {
    topo = std::make_shared<const topology::Topology>(topology::load_topology(context_.topology));
  } catch (const support::InputError& e) {
    status_->setText(QString::fromStdString(e.what()));
    return;
  }
  simulating_ = true;
  simulate_button_->setEnabled(false);
  status_->setText(tr("simulating %1 sizes and the baselines...").arg(kSimSizes));
  const std::uint64_t size = support::parse_size(timeline_size_->currentText().toStdString());
  auto* watcher = new QFutureWatcher<std::shared_ptr<Simulation>>(this);
  connect(watcher, &QFutureWatcher<std::shared_ptr<Simulation>>::finished, this, [this, watcher] {
    auto result = watcher->result();
    watcher->deleteLater();
    simulation_done(std::move(result));
  });
  watcher->setFuture(QtConcurrent::run(simulate_text, editor_->toPlainText().toStdString(), topo,
                                       context_.collective, size));
}

void EditorView::simulation_done(std::shared_ptr<Simulation> result) {
  simulating_ = false;
  simulate_button_->setEnabled(true);
  if (!result->error.empty()) {
    status_->setText(tr("simulation failed: %1").arg(QString::fromStdString(result->error)));
    return;
  }
  last_ = std::move(result);
  status_->setText(
      tr("simulated on %1: at %2, %3 us, %4 GB/s busbw (%5)")
          .arg(QString::fromStdString(last_->topology))
          .arg(size_label(last_->detail.size_bytes))
          .arg(last_->detail.time_us, 0, 'f', 1)
          .arg(last_->detail.busbw_GBps, 0, 'f', 1)
          .arg(QString::fromStdString(std::string(topology::to_string(last_->detail.protocol)))));
  draw_bandwidth();
  draw_timeline();
  Q_EMIT simulated(QString::fromStdString(last_->topology), last_->detail.links,
                   tr("the editor's program at %1").arg(size_label(last_->detail.size_bytes)));
}

void EditorView::draw_bandwidth() {
  QChart* chart = bandwidth_->chart();
  reset_size_chart(chart,
                   last_ ? tr("Bus bandwidth on %1 (alpha-beta model)")
                               .arg(QString::fromStdString(last_->topology))
                         : tr("Bus bandwidth (press Simulate)"),
                   tr("busbw (GB/s)"));
  if (!last_) return;
  const std::vector<std::uint64_t>& sizes = last_->reference.sizes;
  add_size_series(chart, tr("this program"), sizes, busbw_of(last_->results), series_colour(0));
  int colour = 1;
  for (const auto& b : last_->baselines)
    add_size_series(chart, QString::fromStdString(b.name), sizes, busbw_of(b.results),
                    series_colour(colour++));
  add_size_series(chart, tr("lower bound"), sizes, busbw_of(last_->bound), QColor(214, 39, 40),
                  true);
}

void EditorView::draw_timeline() {
  timeline_scene_->clear();
  timeline_bars_ = critical_bars_ = 0;
  if (!last_) return;
  const sim::SimResult& r = last_->detail;
  const bool by_link = timeline_rows_->currentIndex() == 1;
  const double us_to_px = r.time_us > 0 ? kTimelineWidth / r.time_us : 1;
  std::set<std::tuple<int, int, int>> critical;
  for (const auto& c : r.critical_path) critical.insert({c.rank, c.tb, c.step});
  std::map<int, int> row_of;  // rank or link -> row
  for (const auto& t : r.timeline) {
    if (by_link)
      for (auto l : t.route) row_of[static_cast<int>(l)];
    else
      row_of[t.rank];
  }
  int row = 0;
  for (auto& [key, index] : row_of) index = row++;
  auto add_text = [&](const QString& text, double x, double y) {
    auto* item = timeline_scene_->addSimpleText(text);
    QFont font = item->font();
    font.setPointSizeF(7.5);
    item->setFont(font);
    item->setPos(x, y);
    item->setFlag(QGraphicsItem::ItemIgnoresTransformations);
    return item;
  };
  for (const auto& [key, index] : row_of)
    add_text(by_link ? QString::fromStdString(last_->link_names.at(static_cast<std::size_t>(key)))
                     : tr("rank %1").arg(key),
             -kLabelWidth, index * kRowHeight);
  for (const auto& t : r.timeline) {
    if (timeline_bars_ >= kMaxTimelineBars) break;
    const auto& step = last_->schedule.programs.at(static_cast<std::size_t>(t.rank))
                           .tbs.at(static_cast<std::size_t>(t.tb))
                           .steps.at(static_cast<std::size_t>(t.step));
    const bool on_path = critical.contains({t.rank, t.tb, t.step});
    QStringList route;
    for (auto l : t.route) route << QString::fromStdString(last_->link_names.at(l));
    const QString tip = tr("chunks %1..%2 of %3, rank %4 -> rank %5\n%6 .. %7 us (%8 bytes)\n"
                           "thread block %9, step %10%11\nroute: %12")
                            .arg(step.src_off)
                            .arg(step.src_off + step.count - 1)
                            .arg(last_->schedule.chunks)
                            .arg(t.rank)
                            .arg(t.peer)
                            .arg(t.start_us, 0, 'f', 2)
                            .arg(t.end_us, 0, 'f', 2)
                            .arg(t.bytes, 0, 'f', 0)
                            .arg(t.tb)
                            .arg(t.step)
                            .arg(on_path ? tr(", on the critical path") : QString())
                            .arg(route.join(", "));
    QList<int> rows;
    if (by_link)
      for (auto l : t.route) rows << row_of[static_cast<int>(l)];
    else
      rows << row_of[t.rank];
    for (int at : rows) {
      QColor fill = series_colour(t.peer);
      fill.setAlpha(on_path ? 255 : 150);
      QPen pen(on_path ? QColor(214, 39, 40) : fill.darker(130), on_path ? 2 : 0.5);
      pen.setCosmetic(true);
      auto* bar = timeline_scene_->addRect(t.start_us * us_to_px, at * kRowHeight,
                                           std::max(0.5, (t.end_us - t.start_us) * us_to_px),
                                           kBarHeight, pen, QBrush(fill));
      bar->setToolTip(tip);
      bar->setZValue(on_path ? 1 : 0);
      ++timeline_bars_;
      critical_bars_ += on_path ? 1 : 0;
    }
  }
  // The time axis, with its unit.
  const double axis_y = row * kRowHeight + 4;
  timeline_scene_->addLine(0, axis_y, kTimelineWidth, axis_y, QPen(Qt::black, 0));
  const double tick = std::pow(10, std::floor(std::log10(std::max(r.time_us, 1e-3) / 5)));
  const double step_us = r.time_us / tick > 20 ? tick * 5 : r.time_us / tick > 10 ? tick * 2 : tick;
  for (double us = 0; us <= r.time_us * 1.0001; us += step_us) {
    timeline_scene_->addLine(us * us_to_px, axis_y, us * us_to_px, axis_y + 4, QPen(Qt::black, 0));
    add_text(QString::number(us, 'g', 4), us * us_to_px, axis_y + 5);
  }
  add_text(tr("time (us) at %1 per rank; red outline: critical path; colour: receiving rank%2")
               .arg(size_label(r.size_bytes))
               .arg(timeline_bars_ >= kMaxTimelineBars
                        ? tr("; first %1 bars shown").arg(kMaxTimelineBars)
                        : QString()),
           0, axis_y + 20);
  // Labels ignore the zoom, so the scene's extent is set, not measured.
  timeline_scene_->setSceneRect(-kLabelWidth - 6, -4, kTimelineWidth + kLabelWidth + 40,
                                axis_y + 40);
  // Start at time 0 with the row labels in view (a view centres a wider scene).
  timeline_->horizontalScrollBar()->setValue(timeline_->horizontalScrollBar()->minimum());
}

}  // namespace optiflow::gui
