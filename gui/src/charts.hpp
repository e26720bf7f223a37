// Chart helpers shared by the views: labelled axes with units and the size axis.
#pragma once

#include <QChart>
#include <QColor>
#include <QString>
#include <cstdint>
#include <span>

class QLineSeries;
class QChartView;

namespace optiflow::gui {

/// A chart view with antialiasing, a title and the legend at the bottom.
QChartView* make_chart_view(const QString& title, QWidget* parent);

/// Clears the chart and sets a log-scale x axis of sizes per rank, labelled 1K, 1M, 1G, and a
/// linear y axis.
void reset_size_chart(QChart* chart, const QString& title, const QString& y_title);

/// Adds a line of (size, value) points, skipping zeros; `dashed` for bounds.
QLineSeries* add_size_series(QChart* chart, const QString& name,
                             std::span<const std::uint64_t> sizes, std::span<const double> values,
                             QColor colour, bool dashed = false);

/// A colour per series index, distinct for the first ten.
QColor series_colour(int index);

/// "1K", "64M": a size as the CLI prints it.
QString size_label(std::uint64_t bytes);

}  // namespace optiflow::gui
