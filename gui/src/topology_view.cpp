#include <QBrush>
#include <QGraphicsEllipseItem>
#include <QGraphicsLineItem>
#include <QGraphicsRectItem>
#include <QGraphicsScene>
#include <QGraphicsSimpleTextItem>
#include <QGraphicsView>
#include <QLabel>
#include <QPen>
#include <QResizeEvent>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>
#include <deque>
#include <map>
#include <set>

#include "optiflow/gui/views.hpp"
#include "optiflow/support/error.hpp"
#include "optiflow/topology/bounds.hpp"
#include "optiflow/topology/topology_io.hpp"

namespace optiflow::gui {
namespace {

using topology::NodeId;
using topology::NodeKind;

constexpr double kGpuStep = 64;  // horizontal distance between GPUs of a host
constexpr double kRowStep = 90;  // vertical distance between rows
constexpr int kHostsPerRow = 4;

// The host a node belongs to: a GPU's own; a NIC's or switch's when every GPU it touches
// is on one host (NVSwitch, a GPU's NIC); -1 for the network between hosts.
std::vector<int> hosts_of(const topology::Topology& t) {
  std::vector<int> host(t.node_count(), -1);
  for (NodeId n = 0; n < t.node_count(); ++n)
    if (t.node(n).kind == NodeKind::gpu) host[n] = t.node(n).host;
  for (int pass = 0; pass < 2; ++pass)  // NICs first learn from GPUs, switches from both
    for (NodeId n = 0; n < t.node_count(); ++n) {
      if (t.node(n).kind == NodeKind::gpu) continue;
      if (pass == 0 && t.node(n).kind == NodeKind::nic && t.node(n).host >= 0) {
        host[n] = t.node(n).host;
        continue;
      }
      std::set<int> seen;
      bool network = false;
      for (topology::LinkId l : t.out_links(n)) {
        const NodeId m = t.link(l).dst;
        if (host[m] >= 0)
          seen.insert(host[m]);
        else if (t.node(m).kind != NodeKind::gpu)
          network = true;
      }
      if (seen.size() == 1 && !(network && t.node(n).kind == NodeKind::switch_))
        host[n] = *seen.begin();
    }
  return host;
}

// Hops from the nearest node inside a host: the network's switches stack above the hosts.
std::vector<int> levels_of(const topology::Topology& t, const std::vector<int>& host) {
  std::vector<int> level(t.node_count(), -1);
  std::deque<NodeId> queue;
  for (NodeId n = 0; n < t.node_count(); ++n)
    if (host[n] >= 0) {
      level[n] = 0;
      queue.push_back(n);
    }
  while (!queue.empty()) {
    const NodeId n = queue.front();
    queue.pop_front();
    for (topology::LinkId l : t.out_links(n)) {
      const NodeId m = t.link(l).dst;
      if (level[m] < 0) {
        level[m] = level[n] + 1;
        queue.push_back(m);
      }
    }
  }
  return level;
}

QColor bandwidth_colour(double bw, double lo, double hi) {
  const double f = hi > lo ? (std::log(bw) - std::log(lo)) / (std::log(hi) - std::log(lo)) : 1;
  return QColor::fromRgbF(static_cast<float>(0.65 - 0.55 * f), static_cast<float>(0.75 - 0.45 * f),
                          static_cast<float>(0.95 - 0.25 * f));
}

QColor utilisation_colour(double u) {  // green (idle) -> yellow -> red (saturated)
  const double f = std::clamp(u, 0.0, 1.0);
  return f < 0.5 ? QColor::fromRgbF(static_cast<float>(2 * f), 0.7f, 0.1f)
                 : QColor::fromRgbF(0.9f, static_cast<float>(0.7 * (2 - 2 * f)), 0.1f);
}

struct DrawnLink {
  NodeId a = 0, b = 0;
  std::vector<topology::LinkId> links;  // both directions
};

}  // namespace

TopologyView::TopologyView(QWidget* parent) : QWidget(parent) {
  auto* layout = new QVBoxLayout(this);
  summary_ = new QLabel(this);
  summary_->setWordWrap(true);
  scene_ = new QGraphicsScene(this);
  view_ = new QGraphicsView(scene_, this);
  view_->setRenderHint(QPainter::Antialiasing);
  view_->setDragMode(QGraphicsView::ScrollHandDrag);
  details_ = new QLabel(tr("Select a link to see its figures."), this);
  details_->setWordWrap(true);
  details_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  layout->addWidget(summary_);
  layout->addWidget(view_, 1);
  layout->addWidget(details_);
  connect(scene_, &QGraphicsScene::selectionChanged, this, &TopologyView::on_selection);
}

// The scene, a child, clears its selection when it is deleted: that must not reach a view
// that is no longer a TopologyView.
TopologyView::~TopologyView() {
  disconnect(scene_, nullptr, this, nullptr);
}

void TopologyView::set_context(const Context& context) {
  const bool same =
      topo_ && context.topology == context_.topology && context.collective == context_.collective;
  context_ = context;
  if (same) return;
  usage_.clear();
  topo_.reset();
  cut_inside_.clear();
  try {
    topo_ = std::make_unique<topology::Topology>(topology::load_topology(context.topology));
    const auto bound = topology::LowerBound::compute(*topo_, context.collective);
    cut_inside_ = bound.phases().front().cut.inside;
  } catch (const support::InputError& e) {
    summary_->setText(QString::fromStdString(e.what()));
  } catch (const support::UnsupportedError& e) {
    summary_->setText(QString::fromStdString(e.what()));
  }
  redraw();
}

void TopologyView::show_utilisation(const std::string& topology,
                                    const std::vector<sim::LinkUsage>& usage, const QString& what) {
  if (!topo_ || topology != topo_->name()) return;
  usage_.assign(topo_->link_count(), 0.0);
  for (const sim::LinkUsage& u : usage)
    if (u.link < usage_.size()) usage_[u.link] = u.utilisation;
  usage_what_ = what;
  redraw();
}

void TopologyView::redraw() {
  scene_->clear();
  links_drawn_ = cut_links_ = nodes_drawn_ = 0;
  if (!topo_) return;
  const topology::Topology& t = *topo_;
  const std::vector<int> host = hosts_of(t);
  const std::vector<int> level = levels_of(t, host);
  const int hosts = std::max(1, t.host_count());
  int per_host = 1;
  for (int h = 0; h < hosts; ++h)
    per_host = std::max<int>(per_host, static_cast<int>(std::count(host.begin(), host.end(), h)));
  std::map<int, std::vector<NodeId>> gpus, nics, local_switches;
  std::map<int, std::vector<NodeId>> network;  // by level
  for (NodeId n = 0; n < t.node_count(); ++n) {
    const auto kind = t.node(n).kind;
    if (host[n] < 0)
      network[level[n] < 0 ? 1 : level[n]].push_back(n);
    else if (kind == NodeKind::gpu)
      gpus[host[n]].push_back(n);
    else if (kind == NodeKind::nic)
      nics[host[n]].push_back(n);
    else
      local_switches[host[n]].push_back(n);
  }
  for (auto& [h, list] : gpus)
    std::sort(list.begin(), list.end(),
              [&](NodeId a, NodeId b) { return t.node(a).local < t.node(b).local; });
  int widest = 1;
  for (const auto& [h, list] : gpus) widest = std::max<int>(widest, static_cast<int>(list.size()));
  widest = std::min(widest, 8);
  const double host_width = widest * kGpuStep + 24;
  const int columns = std::min(hosts, kHostsPerRow);
  const int levels_up = network.empty() ? 0 : network.rbegin()->first;
  const double top = levels_up * kRowStep;
  std::vector<QPointF> where(t.node_count());

  auto row = [&](const std::vector<NodeId>& list, double x0, double y, double width) {
    const int per_row = std::max(1, std::min<int>(static_cast<int>(list.size()), 8));
    for (std::size_t i = 0; i < list.size(); ++i) {
      const double step = width / per_row;
      where[list[i]] =
          QPointF(x0 + step * (static_cast<double>(i % static_cast<std::size_t>(per_row)) + 0.5),
                  y + 44.0 * static_cast<double>(i / static_cast<std::size_t>(per_row)));
    }
  };
  std::map<int, QRectF> boxes;
  for (int h = 0; h < hosts; ++h) {
    const double x0 = (h % columns) * (host_width + 30);
    const int gpu_rows = (static_cast<int>(gpus[h].size()) + 7) / 8;
    const double box_height = kRowStep * 2 + 44.0 * std::max(0, gpu_rows - 1) + 20;
    const double y0 = top + 40 + (h / columns) * (box_height + 40);
    boxes[h] = QRectF(x0, y0, host_width, box_height);
    row(local_switches[h], x0, y0 + 25, host_width);
    row(gpus[h], x0, y0 + 25 + kRowStep * (local_switches[h].empty() ? 0.3 : 1), host_width);
    row(nics[h], x0, y0 + 25 + kRowStep * 2 + 44.0 * std::max(0, gpu_rows - 1) - 10, host_width);
  }
  const double total_width = columns * (host_width + 30) - 30;
  for (const auto& [lvl, list] : network) row(list, 0, top - (lvl - 1) * kRowStep, total_width);

  for (const auto& [h, box] : boxes) {
    auto* item = scene_->addRect(box, QPen(QColor(150, 150, 150), 1, Qt::DashLine),
                                 QBrush(QColor(245, 245, 245)));
    item->setZValue(-2);
    auto* label = scene_->addSimpleText(tr("host %1").arg(h));
    label->setPos(box.topLeft() + QPointF(4, 2));
    label->setBrush(QColor(90, 90, 90));
  }

  // One drawn line per linked pair of nodes.
  std::map<std::pair<NodeId, NodeId>, DrawnLink> pairs;
  double lo = 1e300, hi = 0;
  for (topology::LinkId l = 0; l < t.link_count(); ++l) {
    const auto& link = t.link(l);
    auto key = std::minmax(link.src, link.dst);
    DrawnLink& d = pairs[{key.first, key.second}];
    d.a = key.first;
    d.b = key.second;
    d.links.push_back(l);
    lo = std::min(lo, link.bw_GBps);
    hi = std::max(hi, link.bw_GBps);
  }
  const std::set<NodeId> inside(cut_inside_.begin(), cut_inside_.end());
  int index = 0;
  for (const auto& [key, d] : pairs) {
    double bw = 0, busiest = 0;
    for (auto l : d.links) {
      bw = std::max(bw, t.link(l).bw_GBps);
      if (!usage_.empty()) busiest = std::max(busiest, usage_[l]);
    }
    const bool cut = inside.contains(d.a) != inside.contains(d.b) && !inside.empty();
    QPen pen(usage_.empty() ? bandwidth_colour(bw, lo, hi) : utilisation_colour(busiest));
    pen.setWidthF(std::clamp(1.0 + std::log2(std::max(1.0, bw / 10.0)), 1.0, 6.0));
    if (cut) {
      if (usage_.empty()) pen.setColor(QColor(214, 39, 40));
      pen.setStyle(Qt::DashLine);
      ++cut_links_;
    }
    auto* line = scene_->addLine(QLineF(where[d.a], where[d.b]), pen);
    line->setFlag(QGraphicsItem::ItemIsSelectable);
    line->setZValue(-1);
    line->setData(0, index++);
    line->setData(1, static_cast<qulonglong>(d.a));
    line->setData(2, static_cast<qulonglong>(d.b));
    line->setToolTip(QString::fromStdString(t.node(d.a).id + " <-> " + t.node(d.b).id));
    ++links_drawn_;
  }

  for (NodeId n = 0; n < t.node_count(); ++n) {
    const auto& node = t.node(n);
    const QPointF p = where[n];
    QPen border(inside.contains(n) ? QColor(214, 39, 40) : QColor(60, 60, 60),
                inside.contains(n) ? 2.5 : 1);
    QString label;
    QGraphicsItem* item = nullptr;
    if (node.kind == NodeKind::gpu) {
      item = scene_->addRect(p.x() - 22, p.y() - 14, 44, 28, border, QBrush(QColor(118, 185, 0)));
      label = tr("GPU %1").arg(node.rank);
    } else if (node.kind == NodeKind::nic) {
      item = scene_->addRect(p.x() - 16, p.y() - 10, 32, 20, border, QBrush(QColor(200, 200, 210)));
      label = tr("NIC");
    } else {
      item =
          scene_->addEllipse(p.x() - 26, p.y() - 14, 52, 28, border, QBrush(QColor(255, 190, 110)));
      label = QString::fromStdString(node.id);
      if (host[n] >= 0 && label.contains('.')) label = label.section('.', 1);  // "h0.nvswitch"
      if (label.size() > 10) label = label.right(10);
    }
    item->setToolTip(
        QString::fromStdString(node.id + " (" + std::string(topology::to_string(node.kind)) + ")"));
    auto* text = scene_->addSimpleText(label);
    QFont font = text->font();
    font.setPointSizeF(7.5);
    text->setFont(font);
    text->setPos(p - QPointF(text->boundingRect().width() / 2, text->boundingRect().height() / 2));
    ++nodes_drawn_;
  }

  const auto& cut_text =
      cut_inside_.empty()
          ? tr("no bound")
          : tr("bottleneck cut of the %1 lower bound: %2 GPUs inside (red "
               "outline), %3 links leave it (dashed)")
                .arg(QString::fromStdString(std::string(support::to_string(context_.collective))))
                .arg(std::count_if(cut_inside_.begin(), cut_inside_.end(),
                                   [&](NodeId n) { return t.node(n).kind == NodeKind::gpu; }))
                .arg(cut_links_);
  summary_->setText(
      tr("<b>%1</b>: %2 GPUs on %3 hosts, %4 nodes, %5 links. Line width and "
         "colour: %6. %7.")
          .arg(QString::fromStdString(t.name()))
          .arg(t.rank_count())
          .arg(t.host_count())
          .arg(t.node_count())
          .arg(t.link_count())
          .arg(usage_.empty()
                   ? tr("bandwidth (light: %1 GB/s, dark: %2 GB/s)").arg(lo).arg(hi)
                   : tr("width bandwidth, colour utilisation of %1 (green idle, red saturated)")
                         .arg(usage_what_))
          .arg(cut_text));
  scene_->setSceneRect(scene_->itemsBoundingRect().adjusted(-20, -20, 20, 20));
  view_->fitInView(scene_->sceneRect(), Qt::KeepAspectRatio);
}

void TopologyView::on_selection() {
  const auto selected = scene_->selectedItems();
  if (selected.isEmpty() || !topo_) return;
  const topology::Topology& t = *topo_;
  const auto a = static_cast<NodeId>(selected.front()->data(1).toULongLong());
  const auto b = static_cast<NodeId>(selected.front()->data(2).toULongLong());
  QStringList lines;
  for (topology::LinkId l = 0; l < t.link_count(); ++l) {
    const auto& link = t.link(l);
    if (std::minmax(link.src, link.dst) != std::minmax(a, b)) continue;
    QString line = tr("link %1: %2 -> %3, %4, %5 GB/s, alpha %6 us")
                       .arg(l)
                       .arg(QString::fromStdString(t.node(link.src).id))
                       .arg(QString::fromStdString(t.node(link.dst).id))
                       .arg(QString::fromStdString(std::string(topology::to_string(link.kind))))
                       .arg(link.bw_GBps)
                       .arg(link.alpha_us);
    if (!usage_.empty()) line += tr(", utilisation %1%").arg(100 * usage_[l], 0, 'f', 1);
    lines << line;
  }
  details_->setText(lines.join("\n"));
}

int TopologyView::link_items() const {
  return links_drawn_;
}
int TopologyView::cut_link_items() const {
  return cut_links_;
}
int TopologyView::node_items() const {
  return nodes_drawn_;
}
QString TopologyView::selected_link_text() const {
  return details_->text();
}

bool TopologyView::select_link(const std::string& a, const std::string& b) {
  if (!topo_) return false;
  const auto na = topo_->find_node(a), nb = topo_->find_node(b);
  if (!na || !nb) return false;
  for (QGraphicsItem* item : scene_->items()) {
    if (!item->data(1).isValid()) continue;
    const auto x = static_cast<NodeId>(item->data(1).toULongLong());
    const auto y = static_cast<NodeId>(item->data(2).toULongLong());
    if (std::minmax(x, y) == std::minmax(*na, *nb)) {
      scene_->clearSelection();
      item->setSelected(true);
      return true;
    }
  }
  return false;
}

}  // namespace optiflow::gui

namespace optiflow::gui {

void TopologyView::resizeEvent(QResizeEvent* event) {
  QWidget::resizeEvent(event);
  view_->fitInView(scene_->sceneRect(), Qt::KeepAspectRatio);
}

void TopologyView::showEvent(QShowEvent* event) {
  QWidget::showEvent(event);
  view_->fitInView(scene_->sceneRect(), Qt::KeepAspectRatio);
}

}  // namespace optiflow::gui
