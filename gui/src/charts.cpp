#include "charts.hpp"

#include <QCategoryAxis>
#include <QChartView>
#include <QLineSeries>
#include <QPen>
#include <QScatterSeries>
#include <QValueAxis>
#include <algorithm>
#include <bit>
#include <cmath>

#include "optiflow/support/sizes.hpp"

namespace optiflow::gui {
namespace {

// Sizes are placed at log2(bytes) on a linear axis whose labels read as sizes do (1K, 32M):
// Qt's log axis can only print numbers.
double size_position(std::uint64_t bytes) {
  return std::log2(static_cast<double>(bytes));
}

// Labels at every `step`-th power of two from lo to hi, at most about eight of them.
void label_sizes(QCategoryAxis* axis, std::uint64_t lo, std::uint64_t hi) {
  for (const QString& label : axis->categoriesLabels()) axis->remove(label);
  const int first = std::bit_width(lo - 1), last = std::bit_width(hi) - 1;
  const int step = std::max(1, (last - first + 7) / 8);
  for (int e = first; e <= last; e += step) axis->append(size_label(std::uint64_t{1} << e), e);
  axis->setRange(size_position(lo), size_position(hi));
}

}  // namespace

QChartView* make_chart_view(const QString& title, QWidget* parent) {
  auto* chart = new QChart();
  chart->setTitle(title);
  chart->legend()->setAlignment(Qt::AlignBottom);
  chart->setMargins(QMargins(4, 4, 4, 4));
  auto* view = new QChartView(chart, parent);
  view->setRenderHint(QPainter::Antialiasing);
  view->setMinimumSize(320, 220);
  return view;
}

void reset_size_chart(QChart* chart, const QString& title, const QString& y_title) {
  chart->removeAllSeries();
  for (QAbstractAxis* axis : chart->axes()) {
    chart->removeAxis(axis);
    delete axis;
  }
  chart->setTitle(title);
  auto* x = new QCategoryAxis();
  x->setLabelsPosition(QCategoryAxis::AxisLabelsPositionOnValue);
  x->setTitleText("buffer size per rank (log scale)");
  auto* y = new QValueAxis();
  y->setTitleText(y_title);
  y->setLabelFormat("%.0f");
  chart->addAxis(x, Qt::AlignBottom);
  chart->addAxis(y, Qt::AlignLeft);
}

QLineSeries* add_size_series(QChart* chart, const QString& name,
                             std::span<const std::uint64_t> sizes, std::span<const double> values,
                             QColor colour, bool dashed) {
  auto* series = new QLineSeries();
  series->setName(name);
  for (std::size_t i = 0; i < sizes.size() && i < values.size(); ++i)
    if (values[i] > 0) series->append(size_position(sizes[i]), values[i]);
  QPen pen(colour);
  pen.setWidthF(dashed ? 1.5 : 2.0);
  if (dashed) pen.setStyle(Qt::DashLine);
  series->setPen(pen);
  chart->addSeries(series);
  const auto horizontal = chart->axes(Qt::Horizontal);
  const auto vertical = chart->axes(Qt::Vertical);
  if (!horizontal.isEmpty()) series->attachAxis(horizontal.front());
  if (!vertical.isEmpty()) {
    series->attachAxis(vertical.front());
    // The y range covers every series; start at 0 so that bandwidths compare by height.
    auto* y = qobject_cast<QValueAxis*>(vertical.front());
    double top = 0;
    for (QAbstractSeries* s : chart->series())
      if (auto* line = qobject_cast<QXYSeries*>(s))
        for (const QPointF& p : line->points()) top = std::max(top, p.y());
    if (y) {
      y->setRange(0, top > 0 ? top * 1.08 : 1);
      y->applyNiceNumbers();
    }
  }
  auto* x = horizontal.isEmpty() ? nullptr : qobject_cast<QCategoryAxis*>(horizontal.front());
  if (x && !sizes.empty()) {
    const auto [lo, hi] = std::minmax_element(sizes.begin(), sizes.end());
    label_sizes(x, *lo, *hi);
  }
  return series;
}

QColor series_colour(int index) {
  static const QColor colours[] = {
      QColor(31, 119, 180), QColor(255, 127, 14),  QColor(44, 160, 44),   QColor(148, 103, 189),
      QColor(140, 86, 75),  QColor(227, 119, 194), QColor(127, 127, 127), QColor(188, 189, 34),
      QColor(23, 190, 207), QColor(214, 39, 40)};
  return colours[static_cast<std::size_t>(index) % std::size(colours)];
}

QString size_label(std::uint64_t bytes) {
  return QString::fromStdString(support::format_size(bytes));
}

}  // namespace optiflow::gui
