#include <QChartView>
#include <QCheckBox>
#include <QComboBox>
#include <QDateEdit>
#include <QDateTimeAxis>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineSeries>
#include <QPushButton>
#include <QScatterSeries>
#include <QSplitter>
#include <QTableWidget>
#include <QTextBrowser>
#include <QUrl>
#include <QVBoxLayout>
#include <QValueAxis>
#include <algorithm>
#include <map>
#include <set>

#include "charts.hpp"
#include "optiflow/db/history.hpp"
#include "optiflow/gui/views.hpp"

namespace optiflow::gui {
namespace {

QString text_of(const std::string& s) {
  return QString::fromStdString(s);
}

QDateTime parse_time(const std::string& iso) {
  QDateTime t = QDateTime::fromString(text_of(iso.substr(0, 19)), Qt::ISODate);
  t.setTimeSpec(Qt::UTC);
  return t;
}

double metric_of(const support::SizeResult& perf, int metric) {
  switch (metric) {
    case 0:
      return perf.busbw_GBps;
    case 1:
      return perf.algbw_GBps;
    case 2:
      return perf.time_us;
    default:
      return perf.bound_us > 0 ? perf.time_us / perf.bound_us : 0;
  }
}

void fill_row(QTableWidget* table, int row, const QStringList& cells) {
  for (int c = 0; c < cells.size(); ++c) table->setItem(row, c, new QTableWidgetItem(cells[c]));
}

QTableWidget* make_table(const QStringList& headers, QWidget* parent) {
  auto* table = new QTableWidget(0, static_cast<int>(headers.size()), parent);
  table->setHorizontalHeaderLabels(headers);
  table->horizontalHeader()->setStretchLastSection(true);
  table->setEditTriggers(QAbstractItemView::NoEditTriggers);
  table->setSelectionBehavior(QAbstractItemView::SelectRows);
  table->setSelectionMode(QAbstractItemView::SingleSelection);
  table->verticalHeader()->setVisible(false);
  return table;
}

}  // namespace

HistoryView::HistoryView(QWidget* parent) : QWidget(parent) {
  topology_ = new QComboBox(this);
  collective_ = new QComboBox(this);
  collective_->addItems({tr("any"), "allgather", "reducescatter", "allreduce"});
  origin_ = new QComboBox(this);
  origin_->addItems({tr("any"), "offline", "llm", "baseline", "import", "user"});
  since_on_ = new QCheckBox(tr("since"), this);
  since_ = new QDateEdit(QDate::currentDate().addMonths(-1), this);
  since_->setCalendarPopup(true);
  since_->setDisplayFormat("yyyy-MM-dd");
  auto* refresh_button = new QPushButton(tr("Refresh"), this);
  metric_name_ = new QComboBox(this);
  metric_name_->addItems(
      {tr("busbw (GB/s)"), tr("algbw (GB/s)"), tr("time (us)"), tr("time / lower bound (x)")});
  metric_size_ = new QComboBox(this);

  auto* filters = new QHBoxLayout();
  filters->addWidget(new QLabel(tr("Topology"), this));
  filters->addWidget(topology_);
  filters->addWidget(new QLabel(tr("Collective"), this));
  filters->addWidget(collective_);
  filters->addWidget(new QLabel(tr("Origin"), this));
  filters->addWidget(origin_);
  filters->addWidget(since_on_);
  filters->addWidget(since_);
  filters->addWidget(refresh_button);
  filters->addStretch();

  runs_ = make_table({tr("run"), tr("topology"), tr("collective"), tr("proposer"), tr("status"),
                      tr("started (UTC)"), tr("candidates"), tr("compiled"), tr("model calls")},
                     this);
  programs_ = make_table(
      {tr("size"), tr("program"), tr("busbw (GB/s)"), tr("x bound"), tr("time (us)")}, this);
  programs_->setToolTip(tr("The run's best program per size; double-click opens it in the editor"));
  calibrations_ =
      make_table({tr("calibrated (UTC)"), tr("host"), tr("backend"), tr("ranks"), tr("topology"),
                  tr("|error| before (med / max)"), tr("after (med / max)")},
                 this);
  calibrations_->setToolTip(
      tr("optiflow calibrate: the links it fitted are stored as the topology named here; the "
         "errors are the simulator's against the measured pairs, before and after"));
  lineage_ = new QTextBrowser(this);
  lineage_->setOpenLinks(false);
  metric_ = make_chart_view(tr("Metric over time"), this);

  auto* metric_box = new QWidget(this);
  auto* metric_layout = new QVBoxLayout(metric_box);
  metric_layout->setContentsMargins(0, 0, 0, 0);
  auto* metric_row = new QHBoxLayout();
  metric_row->addWidget(new QLabel(tr("Plot"), metric_box));
  metric_row->addWidget(metric_name_);
  metric_row->addWidget(new QLabel(tr("at size"), metric_box));
  metric_row->addWidget(metric_size_);
  metric_row->addStretch();
  metric_layout->addLayout(metric_row);
  metric_layout->addWidget(metric_, 1);

  auto* left = new QSplitter(Qt::Vertical, this);
  left->addWidget(runs_);
  left->addWidget(programs_);
  left->addWidget(calibrations_);
  auto* right = new QSplitter(Qt::Vertical, this);
  right->addWidget(lineage_);
  right->addWidget(metric_box);
  auto* split = new QSplitter(Qt::Horizontal, this);
  split->addWidget(left);
  split->addWidget(right);
  auto* layout = new QVBoxLayout(this);
  layout->addLayout(filters);
  layout->addWidget(split, 1);

  connect(refresh_button, &QPushButton::clicked, this, &HistoryView::refresh);
  for (QComboBox* box : {topology_, collective_, origin_})
    connect(box, &QComboBox::activated, this, [this] { refresh(); });
  connect(since_on_, &QCheckBox::toggled, this, [this] { refresh(); });
  connect(since_, &QDateEdit::dateChanged, this, [this] {
    if (since_on_->isChecked()) refresh();
  });
  connect(runs_, &QTableWidget::cellClicked, this, [this](int row, int) { select_run(row); });
  connect(programs_, &QTableWidget::cellClicked, this, [this](int row, int) {
    show_program(programs_->item(row, 1)->data(Qt::UserRole).toLongLong());
  });
  connect(programs_, &QTableWidget::cellDoubleClicked, this, [this](int row, int) {
    try {
      if (auto p = db::Store::open(context_.db_path)
                       .program(programs_->item(row, 1)->data(Qt::UserRole).toLongLong()))
        Q_EMIT open_program(text_of(p->source));
    } catch (const db::DbError&) {
    }
  });
  connect(lineage_, &QTextBrowser::anchorClicked, this, [this](const QUrl& url) {
    if (url.scheme() == "program") show_program(url.path().toLongLong());
  });
  connect(metric_name_, &QComboBox::currentIndexChanged, this, [this] { draw_metric(); });
  connect(metric_size_, &QComboBox::currentIndexChanged, this, [this] { draw_metric(); });
}

void HistoryView::set_context(const Context& context) {
  context_ = context;
  topology_->clear();
  topology_->addItem(tr("any"));
  for (const std::string& name : known_topologies(context.db_path))
    topology_->addItem(text_of(name));
  topology_->setCurrentText(text_of(context.topology));
  refresh();
}

void HistoryView::set_filter(const QString& topology, const QString& collective,
                             const QString& origin) {
  topology_->setCurrentText(topology.isEmpty() ? tr("any") : topology);
  collective_->setCurrentText(collective.isEmpty() ? tr("any") : collective);
  origin_->setCurrentText(origin.isEmpty() ? tr("any") : origin);
  refresh();
}

namespace {

db::HistoryFilter filter_of(QComboBox* topology, QComboBox* collective, QComboBox* origin,
                            QCheckBox* since_on, QDateEdit* since) {
  db::HistoryFilter f;
  if (topology->currentIndex() > 0 ||
      (topology->currentIndex() < 0 && !topology->currentText().isEmpty()))
    f.topology = topology->currentText().toStdString();
  if (collective->currentIndex() > 0) f.collective = collective->currentText().toStdString();
  if (origin->currentIndex() > 0) f.origin = origin->currentText().toStdString();
  if (since_on->isChecked()) f.since = since->date().toString(Qt::ISODate).toStdString();
  return f;
}

}  // namespace

void HistoryView::refresh() {
  const db::HistoryFilter filter = filter_of(topology_, collective_, origin_, since_on_, since_);
  runs_->setRowCount(0);
  programs_->setRowCount(0);
  calibrations_->setRowCount(0);
  try {
    const db::Store store = db::Store::open(context_.db_path);
    const auto runs = db::list_runs(store, filter);
    runs_->setRowCount(static_cast<int>(runs.size()));
    for (std::size_t i = 0; i < runs.size(); ++i) {  // newest first
      const db::RunSummary& r = runs[runs.size() - 1 - i];
      fill_row(
          runs_, static_cast<int>(i),
          {QString::number(r.run.id), text_of(r.run.topology_name), text_of(r.run.collective),
           text_of(r.run.proposer), text_of(r.run.status), text_of(r.run.started_at.substr(0, 19)),
           QString("%1 / %2").arg(r.stats.candidates).arg(r.run.budget),
           QString::number(r.stats.compiled), QString::number(r.calls.calls)});
      runs_->item(static_cast<int>(i), 0)
          ->setData(Qt::UserRole, QVariant::fromValue<qlonglong>(r.run.id));
    }
    runs_->resizeColumnsToContents();
    show_calibrations(store.calibrations());
  } catch (const db::DbError& e) {
    lineage_->setPlainText(text_of(e.what()));
  }
  // The sizes the metric can be plotted at.
  const QString size_before = metric_size_->currentText();
  metric_size_->blockSignals(true);
  metric_size_->clear();
  try {
    std::set<std::uint64_t> sizes;
    for (const db::RunInfo& run : db::Store::open(context_.db_path).runs(filter))
      sizes.insert(run.sizes.begin(), run.sizes.end());
    for (std::uint64_t s : sizes)
      metric_size_->addItem(size_label(s), QVariant::fromValue<qulonglong>(s));
  } catch (const db::DbError&) {
  }
  if (!size_before.isEmpty())
    metric_size_->setCurrentText(size_before);
  else if (metric_size_->count() > 0)
    metric_size_->setCurrentText("64M");
  metric_size_->blockSignals(false);
  draw_metric();
}

void HistoryView::select_run(int row) {
  if (row < 0 || row >= runs_->rowCount()) return;
  runs_->selectRow(row);
  const db::Id run_id = runs_->item(row, 0)->data(Qt::UserRole).toLongLong();
  programs_->setRowCount(0);
  try {
    const db::Store store = db::Store::open(context_.db_path);
    const auto detail = db::run_detail(store, run_id);
    if (!detail) return;
    programs_->setRowCount(static_cast<int>(detail->best.size()));
    for (std::size_t i = 0; i < detail->best.size(); ++i) {
      const db::BestEntry& b = detail->best[i];
      fill_row(programs_, static_cast<int>(i),
               {size_label(b.size_bytes), QString("#%1").arg(b.program_id),
                QString::number(b.perf.busbw_GBps, 'f', 2),
                QString::number(b.perf.bound_us > 0 ? b.perf.time_us / b.perf.bound_us : 0, 'f', 3),
                QString::number(b.perf.time_us, 'f', 3)});
      programs_->item(static_cast<int>(i), 1)
          ->setData(Qt::UserRole, QVariant::fromValue<qlonglong>(b.program_id));
    }
    programs_->resizeColumnsToContents();
    if (!detail->best.empty()) {
      programs_->selectRow(static_cast<int>(detail->best.size() * 3 / 4));
      show_program(detail->best[detail->best.size() * 3 / 4].program_id);
    }
  } catch (const db::DbError& e) {
    lineage_->setPlainText(text_of(e.what()));
  }
}

void HistoryView::show_program(db::Id program_id) {
  std::optional<db::ProgramLineage> lineage;
  try {
    lineage = db::program_lineage(db::Store::open(context_.db_path), program_id);
  } catch (const db::DbError& e) {
    lineage_->setPlainText(text_of(e.what()));
    return;
  }
  if (!lineage) return;
  shown_program_ = program_id;
  const db::ProgramInfo& p = lineage->program;
  QString html = tr("<h3>Program #%1</h3><p>origin <b>%2</b>, first stored %3</p><pre>%4</pre>")
                     .arg(p.id)
                     .arg(text_of(p.origin))
                     .arg(text_of(p.created_at.substr(0, 19)))
                     .arg(text_of(p.source).toHtmlEscaped());
  html += tr("<h4>Lineage</h4>");
  if (lineage->ancestors.empty()) html += tr("<p>no parents (an initial program)</p>");
  for (const db::Ancestor& a : lineage->ancestors)
    html +=
        QString(
            "<p style='margin-left:%1px'>%2 <a href='program:%3'>#%3</a> (%4): <code>%5</code></p>")
            .arg(12 * a.depth)
            .arg(a.depth == 1 ? tr("parent") : tr("ancestor, depth %1").arg(a.depth))
            .arg(a.program.id)
            .arg(text_of(a.program.origin))
            .arg(text_of(a.program.source).simplified().left(100).toHtmlEscaped());
  html += tr("<h4>Proposed by</h4>");
  if (lineage->proposed_by.empty()) html += tr("<p>no model call (offline proposer or user)</p>");
  for (const db::ModelCall& c : lineage->proposed_by)
    html += tr("<p>call %1 of run %2: %3 (%4), %5 + %6 tokens, %7 ms%8</p>")
                .arg(c.id)
                .arg(c.run_id)
                .arg(text_of(c.model))
                .arg(text_of(c.purpose))
                .arg(c.prompt_tokens)
                .arg(c.completion_tokens)
                .arg(c.latency_ms, 0, 'f', 0)
                .arg(c.cached ? tr(", replayed") : QString());
  html += tr("<h4>Results (%1)</h4><table border='0' cellspacing='0' cellpadding='2'>"
             "<tr><th align='left'>topology</th><th align='left'>collective</th><th "
             "align='left'>model or backend</th>"
             "<th align='right'>size</th><th align='right'>time (us)</th><th align='right'>busbw "
             "(GB/s)</th></tr>")
              .arg(lineage->results.size());
  for (const auto& r : lineage->results)
    html +=
        QString(
            "<tr><td>%1</td><td>%2</td><td>%3</td><td align='right'>%4</td><td "
            "align='right'>%5</td>"
            "<td align='right'>%6</td></tr>")
            .arg(text_of(r.topology))
            .arg(text_of(r.collective))
            .arg(r.backend.empty() ? text_of(r.model) : tr("measured: %1").arg(text_of(r.backend)))
            .arg(size_label(r.perf.size_bytes))
            .arg(r.perf.time_us, 0, 'f', 3)
            .arg(r.perf.busbw_GBps, 0, 'f', 2);
  html += "</table>";
  lineage_->setHtml(html);
}

void HistoryView::show_calibrations(const std::vector<db::CalibrationRecord>& calibrations) {
  calibrations_->setRowCount(static_cast<int>(calibrations.size()));
  for (std::size_t i = 0; i < calibrations.size(); ++i) {  // newest first, as stored
    const db::CalibrationRecord& c = calibrations[i];
    const auto errors = [&](double median, double worst) {
      return c.checked
                 ? QString("%1% / %2%").arg(100 * median, 0, 'f', 1).arg(100 * worst, 0, 'f', 1)
                 : tr("not checked");
    };
    fill_row(calibrations_, static_cast<int>(i),
             {text_of(c.created_at.substr(0, 19)), text_of(c.host), text_of(c.backend),
              QString::number(c.ranks), text_of(c.topology_name),
              errors(c.median_error_before, c.worst_error_before),
              errors(c.median_error_after, c.worst_error_after)});
  }
  calibrations_->resizeColumnsToContents();
}

void HistoryView::draw_metric() {
  QChart* chart = metric_->chart();
  chart->removeAllSeries();
  for (QAbstractAxis* axis : chart->axes()) {
    chart->removeAxis(axis);
    delete axis;
  }
  if (metric_size_->count() == 0) return;
  const std::uint64_t size = metric_size_->currentData().toULongLong();
  const int metric = metric_name_->currentIndex();
  const bool lower_is_better = metric >= 2;
  std::vector<db::ResultRow> rows;
  try {
    rows = db::Store::open(context_.db_path)
               .results(filter_of(topology_, collective_, origin_, since_on_, since_));
  } catch (const db::DbError&) {
    return;
  }
  std::vector<std::pair<QDateTime, double>> points;
  for (const db::ResultRow& r : rows)
    if (r.perf.size_bytes == size && r.model == "alpha-beta")
      points.emplace_back(parse_time(r.recorded_at), metric_of(r.perf, metric));
  std::stable_sort(points.begin(), points.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  chart->setTitle(tr("%1 at %2 over time (alpha-beta model, %3 results)")
                      .arg(metric_name_->currentText())
                      .arg(metric_size_->currentText())
                      .arg(points.size()));
  auto* scatter = new QScatterSeries();
  scatter->setName(tr("candidates"));
  scatter->setMarkerSize(5);
  scatter->setColor(series_colour(0));
  scatter->setBorderColor(Qt::transparent);
  auto* best = new QLineSeries();
  best->setName(tr("best so far"));
  best->setPen(QPen(series_colour(3), 2));
  double best_value = 0, lo = 1e300, hi = 0;
  for (std::size_t i = 0; i < points.size(); ++i) {
    const auto& [when, value] = points[i];
    const double x = static_cast<double>(when.toMSecsSinceEpoch());
    scatter->append(x, value);
    if (i == 0 || (lower_is_better ? value < best_value : value > best_value)) best_value = value;
    best->append(x, best_value);
    lo = std::min(lo, value);
    hi = std::max(hi, value);
  }
  chart->addSeries(scatter);
  chart->addSeries(best);
  auto* x = new QDateTimeAxis();
  x->setTitleText(tr("recorded at (UTC)"));
  x->setFormat("MM-dd hh:mm:ss");
  x->setTickCount(5);
  auto* y = new QValueAxis();
  y->setTitleText(metric_name_->currentText());
  chart->addAxis(x, Qt::AlignBottom);
  chart->addAxis(y, Qt::AlignLeft);
  for (QAbstractSeries* s :
       {static_cast<QAbstractSeries*>(scatter), static_cast<QAbstractSeries*>(best)}) {
    s->attachAxis(x);
    s->attachAxis(y);
  }
  if (!points.empty()) {
    QDateTime first = points.front().first, last = points.back().first;
    if (first == last) last = first.addSecs(1);
    x->setRange(first, last);
    y->setRange(lower_is_better ? std::max(0.0, lo * 0.95) : 0, hi * 1.05 + 1e-9);
    y->applyNiceNumbers();
  }
}

}  // namespace optiflow::gui
