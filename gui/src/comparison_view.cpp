#include <QChartView>
#include <QCheckBox>
#include <QComboBox>
#include <QFileDialog>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QSplitter>
#include <QTableWidget>
#include <QVBoxLayout>
#include <cmath>

#include "charts.hpp"
#include "optiflow/baselines/baseline.hpp"
#include "optiflow/gui/views.hpp"
#include "optiflow/support/error.hpp"
#include "optiflow/support/sizes.hpp"
#include "optiflow/support/text_file.hpp"
#include "optiflow/support/units.hpp"
#include "optiflow/topology/topology_io.hpp"

namespace optiflow::gui {
namespace {

// A stored comparison as compare() returned it, so that the table, the plot and the exports
// are the CLI's. NCCL's column is the stored "nccl" contender (what compare() measured it by).
explore::Comparison from_record(const db::ComparisonRecord& record) {
  explore::Comparison c;
  c.id = record.id;
  c.topology = record.topology_name;
  c.collective =
      support::collective_from_string(record.collective).value_or(support::Collective::all_gather);
  c.model = sim::model_from_string(record.model).value_or(sim::Model::alpha_beta);
  if (!record.contenders.empty())
    for (const support::SizeResult& r : record.contenders.front().results) {
      c.sizes.push_back(r.size_bytes);
      c.bound_us.push_back(r.bound_us);
    }
  if (!c.sizes.empty()) try {
      c.ranks = topology::load_topology(record.topology_name).rank_count();
    } catch (const support::InputError&) {
      // A topology file that moved: the ranks follow from busbw = algbw * (N-1)/N.
      const support::SizeResult& first = record.contenders.front().results.front();
      const double f = first.busbw_GBps / first.algbw_GBps;
      c.ranks = static_cast<int>(
          std::lround(c.collective == support::Collective::all_reduce ? 2 / (2 - f) : 1 / (1 - f)));
    }
  for (const db::ComparisonContender& k : record.contenders) {
    explore::Contender contender;
    contender.name = k.name;
    contender.synthesis_s = k.synthesis_s;
    contender.status = k.status;
    contender.results = k.results;
    contender.choices = k.choices;
    contender.choices.resize(k.results.size());
    if (k.name == "nccl")
      for (const support::SizeResult& r : contender.results) c.nccl_us.push_back(r.time_us);
    c.contenders.push_back(std::move(contender));
  }
  return c;
}

// One row per size, a column per contender: its bus bandwidth and x bound, the fastest of the
// row in bold; the time, the speed-up over NCCL and what it ran at that size in the tooltip.
void fill_table(QTableWidget* table, const explore::Comparison& c) {
  const double factor = support::busbw_factor(c.collective, c.ranks);
  QStringList headers{QObject::tr("size"), QObject::tr("bound (GB/s)")};
  for (const explore::Contender& k : c.contenders) headers << QString::fromStdString(k.name);
  table->clear();
  table->setColumnCount(static_cast<int>(headers.size()));
  table->setHorizontalHeaderLabels(headers);
  table->setRowCount(static_cast<int>(c.sizes.size()));
  const auto right_aligned = [](const QString& text) {
    auto* item = new QTableWidgetItem(text);
    item->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
    return item;
  };
  for (std::size_t s = 0; s < c.sizes.size(); ++s) {
    const int row = static_cast<int>(s);
    table->setItem(row, 0, right_aligned(size_label(c.sizes[s])));
    const double bound_GBps = support::GBps_of(static_cast<double>(c.sizes[s]), c.bound_us[s]);
    table->setItem(row, 1, right_aligned(QString::number(bound_GBps * factor, 'f', 2)));
    QTableWidgetItem* fastest = nullptr;
    double fastest_us = 0;
    for (std::size_t k = 0; k < c.contenders.size(); ++k) {
      const explore::Contender& contender = c.contenders[k];
      if (s >= contender.results.size() || contender.results[s].time_us <= 0) continue;
      const support::SizeResult& p = contender.results[s];
      auto* item = right_aligned(QString("%1 (%2x)")
                                     .arg(p.busbw_GBps, 0, 'f', 2)
                                     .arg(p.time_us / c.bound_us[s], 0, 'f', 3));
      QString tip = QObject::tr("%1 us").arg(p.time_us, 0, 'f', 3);
      if (s < c.nccl_us.size() && c.nccl_us[s] > 0)
        tip += QObject::tr("; %1x NCCL's speed").arg(c.nccl_us[s] / p.time_us, 0, 'f', 2);
      if (s < contender.choices.size() && !contender.choices[s].empty())
        tip += "; " + QString::fromStdString(contender.choices[s]);
      item->setToolTip(tip);
      table->setItem(row, static_cast<int>(k) + 2, item);
      if (!fastest || p.time_us < fastest_us) {
        fastest = item;
        fastest_us = p.time_us;
      }
    }
    if (fastest) {
      QFont bold = fastest->font();
      bold.setBold(true);
      fastest->setFont(bold);
    }
  }
  table->resizeColumnsToContents();
}

}  // namespace

ComparisonView::ComparisonView(QWidget* parent) : QWidget(parent) {
  stored_ = new QComboBox(this);
  stored_->setMinimumWidth(320);
  sizes_ = new QLineEdit(support::kDefaultSizes, this);
  model_ = new QComboBox(this);
  model_->addItems({"alpha-beta", "flow"});
  run_ = new QPushButton(tr("Compare"), this);
  auto* png = new QPushButton(tr("Export PNG"), this);
  auto* svg = new QPushButton(tr("Export SVG"), this);
  auto* csv = new QPushButton(tr("Export CSV"), this);
  status_ = new QLabel(this);
  status_->setWordWrap(true);

  auto* row1 = new QHBoxLayout();
  row1->addWidget(new QLabel(tr("Stored comparison:"), this));
  row1->addWidget(stored_, 1);
  row1->addWidget(png);
  row1->addWidget(svg);
  row1->addWidget(csv);
  auto* row2 = new QHBoxLayout();
  row2->addWidget(new QLabel(tr("New: contenders"), this));
  auto add_contender = [&](const QString& name, bool on) {
    auto* box = new QCheckBox(name, this);
    box->setChecked(on);
    contenders_.push_back(box);
    row2->addWidget(box);
  };
  add_contender("ours", true);
  for (std::string_view name : baselines::baseline_names())
    add_contender(QString::fromUtf8(name.data(), static_cast<qsizetype>(name.size())),
                  name == "nccl");
  row2->addWidget(new QLabel(tr("sizes"), this));
  row2->addWidget(sizes_);
  row2->addWidget(new QLabel(tr("model"), this));
  row2->addWidget(model_);
  row2->addWidget(run_);
  row2->addStretch();

  table_ = new QTableWidget(0, 0, this);
  table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  table_->verticalHeader()->setVisible(false);
  chart_ = make_chart_view(tr("Bus bandwidth"), this);
  auto* split = new QSplitter(Qt::Horizontal, this);
  split->addWidget(table_);
  split->addWidget(chart_);
  split->setStretchFactor(0, 1);
  split->setStretchFactor(1, 1);
  auto* layout = new QVBoxLayout(this);
  layout->addLayout(row1);
  layout->addLayout(row2);
  layout->addWidget(status_);
  layout->addWidget(split, 1);

  connect(run_, &QPushButton::clicked, this, &ComparisonView::run);
  connect(stored_, &QComboBox::activated, this,
          [this](int index) { show_stored(stored_->itemData(index).toLongLong()); });
  connect(png, &QPushButton::clicked, this, [this] {
    if (const QString path = chosen_export(tr("PNG image (*.png)")); !path.isEmpty())
      export_png(path);
  });
  connect(svg, &QPushButton::clicked, this, [this] {
    if (const QString path = chosen_export(tr("SVG image (*.svg)")); !path.isEmpty())
      export_svg(path);
  });
  connect(csv, &QPushButton::clicked, this, [this] {
    if (const QString path = chosen_export(tr("CSV (*.csv)")); !path.isEmpty()) export_csv(path);
  });
}

ComparisonView::~ComparisonView() {
  if (worker_.joinable()) worker_.join();
}

QString ComparisonView::chosen_export(const QString& filter) {
  return QFileDialog::getSaveFileName(this, tr("Export the comparison"), QString(), filter);
}

void ComparisonView::set_context(const Context& context) {
  context_ = context;
  reload_stored();
  if (stored_->count() > 0) {
    show_stored(stored_->itemData(0).toLongLong());
  } else {
    comparison_.reset();
    table_->setRowCount(0);
    chart_->chart()->removeAllSeries();
    status_->setText(tr("No stored comparison for %1: tick contenders and press Compare.")
                         .arg(QString::fromStdString(context.topology)));
  }
}

void ComparisonView::reload_stored() {
  stored_->clear();
  try {
    db::HistoryFilter filter;
    filter.topology = context_.topology;
    filter.collective = std::string(support::to_string(context_.collective));
    for (const db::ComparisonRecord& c : db::Store::open(context_.db_path).comparisons(filter)) {
      QStringList names;
      for (const auto& k : c.contenders) names << QString::fromStdString(k.name);
      stored_->addItem(tr("#%1 %2 (%3 model): %4")
                           .arg(c.id)
                           .arg(QString::fromStdString(c.created_at.substr(0, 19)))
                           .arg(QString::fromStdString(c.model))
                           .arg(names.join(", ")),
                       QVariant::fromValue<qlonglong>(c.id));
    }
  } catch (const db::DbError& e) {
    status_->setText(QString::fromStdString(e.what()));
  }
}

void ComparisonView::show_stored(db::Id comparison_id) {
  try {
    for (const db::ComparisonRecord& c : db::Store::open(context_.db_path).comparisons())
      if (c.id == comparison_id) {
        show(from_record(c));
        return;
      }
  } catch (const db::DbError& e) {
    status_->setText(QString::fromStdString(e.what()));
  }
}

void ComparisonView::set_contenders(const QStringList& names) {
  for (QCheckBox* box : contenders_) box->setChecked(names.contains(box->text()));
}
void ComparisonView::set_sizes(const QString& sizes) {
  sizes_->setText(sizes);
}

void ComparisonView::run() {
  if (running_) return;
  explore::CompareOptions options;
  try {
    options.sizes = support::parse_sizes(sizes_->text().toStdString());
  } catch (const support::InputError& e) {
    status_->setText(QString::fromStdString(e.what()));
    return;
  }
  options.topology = context_.topology;
  options.collective = context_.collective;
  options.model = *sim::model_from_string(model_->currentText().toStdString());
  options.db_path = context_.db_path;
  options.with.clear();
  for (QCheckBox* box : contenders_)
    if (box->isChecked()) options.with.push_back(box->text().toStdString());
  if (options.with.empty()) {
    status_->setText(tr("Tick at least one contender."));
    return;
  }
  running_ = true;
  run_->setEnabled(false);
  status_->setText(tr("comparing (solvers can take a while)..."));
  if (worker_.joinable()) worker_.join();
  worker_ = std::thread([this, options] {
    std::optional<explore::Comparison> result;
    QString error;
    try {
      result = explore::compare(options);
    } catch (const std::exception& e) {
      error = QString::fromStdString(e.what());
    }
    QMetaObject::invokeMethod(
        this,
        [this, result, error] {
          running_ = false;
          run_->setEnabled(true);
          if (!result) {
            status_->setText(tr("compare failed: %1").arg(error));
            return;
          }
          reload_stored();
          show(*result);
        },
        Qt::QueuedConnection);
  });
}

void ComparisonView::show(explore::Comparison c) {
  for (int i = 0; i < stored_->count(); ++i)
    if (stored_->itemData(i).toLongLong() == c.id) stored_->setCurrentIndex(i);
  status_->setText(tr("comparison %1: %2 on %3, %4 model, %5 ranks. x bound: time / lower bound; "
                      "vs nccl: NCCL's tuner's time over this one's (above 1: faster than NCCL).")
                       .arg(c.id)
                       .arg(QString::fromStdString(std::string(support::to_string(c.collective))))
                       .arg(QString::fromStdString(c.topology))
                       .arg(QString::fromStdString(std::string(sim::to_string(c.model))))
                       .arg(c.ranks > 0 ? QString::number(c.ranks) : tr("?")));
  fill_table(table_, c);

  QChart* chart = chart_->chart();
  reset_size_chart(chart,
                   tr("%1 on %2 (%3 model)")
                       .arg(QString::fromStdString(std::string(support::to_string(c.collective))))
                       .arg(QString::fromStdString(c.topology))
                       .arg(QString::fromStdString(std::string(sim::to_string(c.model)))),
                   tr("busbw (GB/s)"));
  int colour = 0;
  for (const explore::Contender& k : c.contenders) {
    std::vector<double> busbw;
    for (const support::SizeResult& p : k.results) busbw.push_back(p.busbw_GBps);
    add_size_series(chart, QString::fromStdString(k.name), c.sizes, busbw, series_colour(colour++));
  }
  std::vector<double> bound_busbw;  // as the SVG plot draws it
  for (std::size_t s = 0; s < c.sizes.size(); ++s)
    bound_busbw.push_back(support::GBps_of(static_cast<double>(c.sizes[s]), c.bound_us[s]) *
                          support::busbw_factor(c.collective, c.ranks));
  add_size_series(chart, tr("lower bound"), c.sizes, bound_busbw, QColor(214, 39, 40), true);
  comparison_ = std::move(c);
}

void ComparisonView::export_png(const QString& path) const {
  chart_->grab().save(path, "PNG");
}

void ComparisonView::export_svg(const QString& path) const {
  if (comparison_)
    support::write_text_file(path.toStdString(), explore::bandwidth_plot_svg(*comparison_));
}

void ComparisonView::export_csv(const QString& path) const {
  if (comparison_)
    support::write_text_file(path.toStdString(), explore::comparison_csv(*comparison_));
}

}  // namespace optiflow::gui
