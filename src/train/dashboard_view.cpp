// The dashboard's state and the composition of a frame from it (no terminal involved).
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "ember/train/detail/dashboard.hpp"

namespace ember::train::detail {

std::vector<std::string> DashboardState::numeric_metrics() const {
    std::vector<std::string> names;
    for (const std::string& name : metric_order) {
        auto has = [&](const std::map<std::string, MetricTrack>& m) {
            auto it = m.find(name);
            return it != m.end() && !it->second.history.empty();
        };
        if (has(train) || has(valid)) names.push_back(name);
    }
    return names;
}

void DashboardState::update(Split split, const MetricEntry& entry, double x) {
    if (std::find(metric_order.begin(), metric_order.end(), entry.name) == metric_order.end())
        metric_order.push_back(entry.name);
    MetricTrack& t = (split == Split::Train ? train : valid)[entry.name];
    t.formatted = entry.formatted;
    t.epoch_mean = entry.epoch_mean;
    if (entry.numeric) {
        t.history.push_back({x, *entry.numeric});
        t.epoch_sum += *entry.numeric;
        ++t.epoch_count;
    }
}

void DashboardState::end_epoch(Split split, std::size_t epoch) {
    for (auto& [name, t] : split == Split::Train ? train : valid) {
        // The Learner's running mean is the authority; the dashboard's own one covers metrics
        // that report none.
        std::optional<double> mean = t.epoch_mean;
        if (!mean && t.epoch_count > 0) mean = t.epoch_sum / static_cast<double>(t.epoch_count);
        if (mean) t.epoch_means.push_back({static_cast<double>(epoch) - 0.5, *mean});
        t.epoch_sum = 0;
        t.epoch_count = 0;
    }
}

double run_position(const TrainingProgress& p, std::size_t iterations_hint) {
    double within;
    if (p.items_total > 0)
        within = double(p.items_processed) / double(p.items_total);
    else if (iterations_hint > 0)
        within = double(p.iteration) / double(iterations_hint);
    else  // nothing known: keep the order of the points, squeezed towards the epoch's end
        within = double(p.iteration) / double(p.iteration + 1);
    return double(p.epoch > 0 ? p.epoch - 1 : 0) + std::clamp(within, 0.0, 1.0);
}

namespace {

constexpr const char* kTrainColor = "36";  // cyan
constexpr const char* kValidColor = "33";  // yellow
constexpr int kLabelWidth = 10;            // the chart's y labels

std::string paint(const DashboardState& s, const char* code, const std::string& text) {
    return s.color ? "\x1b[" + std::string(code) + "m" + text + "\x1b[0m" : text;
}

std::string number(double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.4g", v);
    return buf;
}

// Text at the left and at the right of `width` columns.
std::string spread(const std::string& left, const std::string& right, std::size_t width) {
    const std::size_t lw = display_width(left), rw = display_width(right);
    if (lw + rw + 1 > width) return fit_width(left, width);
    return left + std::string(width - lw - rw, ' ') + right;
}

double split_fraction(const TrainingProgress& p) {
    return p.items_total > 0 ? double(p.items_processed) / double(p.items_total) : 0.0;
}

void add_chart(const DashboardState& s, std::vector<std::string>& out, int width, int rows) {
    const auto names = s.numeric_metrics();
    const bool epochs = s.view == ChartView::Epochs;
    if (names.empty()) {
        out.push_back(" Chart: (no numeric metric yet)");
        for (int r = 0; r < rows + 1; ++r) out.emplace_back();
        return;
    }
    const std::string& name = names[s.selected % names.size()];
    static const std::vector<ChartPoint> kNone;
    auto series =
        [&](const std::map<std::string, MetricTrack>& m) -> const std::vector<ChartPoint>& {
        auto it = m.find(name);
        if (it == m.end()) return kNone;
        return epochs ? it->second.epoch_means : it->second.history;
    };
    const auto& tr = series(s.train);
    const auto& va = series(s.valid);
    out.push_back(" Chart: " + name + (epochs ? " \u2014 epoch means" : " \u2014 iterations") +
                  "   " + paint(s, kTrainColor, "\u2501 train") + "  " +
                  paint(s, kValidColor, "\u2501 valid") + "   (" +
                  std::to_string(s.selected % names.size() + 1) + "/" +
                  std::to_string(names.size()) + ")");
    const auto [lo, hi] = value_range({&tr, &va});
    std::size_t total = 1;
    if (s.train_progress) total = std::max(total, s.train_progress->epoch_total);
    if (s.valid_progress) total = std::max(total, s.valid_progress->epoch_total);
    const int cw = std::max(1, width - kLabelWidth - 1);
    BrailleCanvas canvas(cw, rows);
    const ChartRange range{0.0, double(total), lo, hi};
    plot_series(canvas, tr, range, 0);
    plot_series(canvas, va, range, 1);
    const std::vector<std::string> colors =
        s.color ? std::vector<std::string>{kTrainColor, kValidColor} : std::vector<std::string>{};
    for (int r = 0; r < rows; ++r) {
        std::string label;
        if (r == 0) label = number(hi);
        if (r == rows - 1) label = number(lo);
        if (r == rows / 2 && rows > 2) label = number((lo + hi) / 2);
        char buf[32];
        std::snprintf(buf, sizeof buf, "%*s \u2502", kLabelWidth - 2, label.c_str());
        out.push_back(buf + canvas.row(r, colors));
    }
    std::string axis(kLabelWidth - 1, ' ');
    axis += "\u2514";
    const std::string right = std::to_string(total) + (total == 1 ? " epoch" : " epochs");
    const int gap = cw - 1 - int(right.size());
    axis += "0" + std::string(static_cast<std::size_t>(std::max(1, gap)), ' ') + right;
    out.push_back(axis);
}

void add_metrics(const DashboardState& s, std::vector<std::string>& out, std::size_t max_rows) {
    char buf[256];
    std::snprintf(buf, sizeof buf, "   %-22s %-26s %-26s", "Metric", "Train", "Valid");
    out.push_back(paint(s, "1", buf));
    const auto numeric = s.numeric_metrics();
    const std::string selected =
        numeric.empty() ? std::string() : numeric[s.selected % numeric.size()];
    auto cell = [](const std::map<std::string, MetricTrack>& m, const std::string& name) {
        auto it = m.find(name);
        if (it == m.end()) return std::string("-");
        std::string v = it->second.formatted;
        if (it->second.epoch_mean) v += " (mean " + number(*it->second.epoch_mean) + ")";
        return v;
    };
    for (std::size_t i = 0; i < s.metric_order.size() && i < max_rows; ++i) {
        const std::string& name = s.metric_order[i];
        std::snprintf(buf, sizeof buf, " %s %-22s %-26s %-26s", name == selected ? "\u25b8" : " ",
                      name.c_str(), cell(s.train, name).c_str(), cell(s.valid, name).c_str());
        out.push_back(buf);
    }
}

void add_progress(const DashboardState& s, std::vector<std::string>& out, int width) {
    const int bar = std::clamp(width / 3, 10, 40);
    const auto& active = s.active == Split::Train ? s.train_progress : s.valid_progress;
    if (!active) {
        out.push_back(" waiting for the first iteration...");
        out.emplace_back();
        return;
    }
    const TrainingProgress* p = &*active;
    const char* split = s.active == Split::Train ? "train" : "valid";
    char head[64];
    std::snprintf(head, sizeof head, " Epoch %zu/%zu %s", p->epoch, p->epoch_total, split);
    std::string line = fit_width(head, 20) + " ";
    const double f = split_fraction(*p);
    if (p->items_total > 0) {
        char pct[96];
        std::snprintf(pct, sizeof pct, " %3d%%  %zu/%zu items", int(f * 100 + 1e-9),
                      p->items_processed, p->items_total);
        const auto eta = eta_seconds(s.epoch_elapsed, f);
        line += paint(s, "32", progress_bar(f, bar)) + pct + "  ETA " +
                (eta ? format_duration(*eta) : std::string("?"));
    } else {
        line += "iteration " + std::to_string(p->iteration);
    }
    out.push_back(line);

    // The run's share: whole epochs done plus the training share of the current one, and the
    // whole of it once validation began (validation is counted as part of its epoch).
    double run = 0;
    if (s.train_progress) {
        const auto& t = *s.train_progress;
        const double within = s.active == Split::Valid ? 1.0 : split_fraction(t);
        run = (double(t.epoch - 1) + within) / double(std::max<std::size_t>(1, t.epoch_total));
    }
    const auto eta = eta_seconds(s.elapsed, run);
    char pct[96];
    std::snprintf(pct, sizeof pct, " %3d%%  elapsed %s", int(run * 100 + 1e-9),
                  format_duration(s.elapsed).c_str());
    out.push_back(fit_width(" Run", 20) + " " + paint(s, "32", progress_bar(run, bar)) + pct +
                  "  ETA " + (eta ? format_duration(*eta) : std::string("?")));
}

}  // namespace

std::vector<std::string> compose_frame(const DashboardState& s, int width, int height) {
    std::vector<std::string> out;
    const std::size_t w = static_cast<std::size_t>(std::max(width, 0));
    if (width < 40 || height < 12) {
        out.push_back("terminal too small (" + std::to_string(width) + "x" +
                      std::to_string(height) + "), need 40x12");
    } else {
        std::string epoch;
        if (const auto& p = s.active == Split::Train ? s.train_progress : s.valid_progress)
            epoch =
                "Epoch " + std::to_string(p->epoch) + "/" + std::to_string(p->epoch_total) + " ";
        out.push_back(spread(paint(s, "1", " ember \u00b7 training"), epoch, w));
        // Fixed rows: header, chart title, axis, blank, table header, blank, 2 bars, status.
        const std::size_t n = s.metric_order.size();
        const int fixed = 9;
        const int chart_rows = std::max(3, height - fixed - int(std::max<std::size_t>(n, 1)));
        add_chart(s, out, width, chart_rows);
        out.emplace_back();
        add_metrics(s, out, static_cast<std::size_t>(std::max(1, height - fixed - chart_rows)));
        out.emplace_back();
        add_progress(s, out, width);
        if (s.stopping)
            out.push_back(paint(s, "1;33",
                                " \u25a0 stopping after this iteration \u2014 a resumed run "
                                "redoes this epoch from the last checkpoint"));
        else
            out.push_back(" q: stop   \u2190/\u2192: metric   \u2191/\u2193: iterations/epochs");
    }
    out.resize(static_cast<std::size_t>(std::max(height, 0)));
    for (std::string& line : out) line = fit_width(line, w);
    return out;
}

}  // namespace ember::train::detail
