// metrics.csv and report.html from the metric logs. The page is drawn here, as SVG, rather than
// by a script in the browser: it must open anywhere (a file on a cluster copied home, a
// browser without network) and show the same curves, so it carries nothing but markup.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <span>

#include <ember/record/recorder.hpp>
#include <ember/tensor/error.hpp>
#include <ember/train/report.hpp>

namespace ember::train {

namespace {

std::string exact(double v) {
    char buf[64];
    auto r = std::to_chars(buf, buf + sizeof buf, v);
    return std::string(buf, r.ptr);
}

// A number for people: 4 significant digits.
std::string short_num(double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.4g", v);
    return buf;
}

std::string html_escape(const std::string& s) {
    std::string out;
    for (char c : s) {
        switch (c) {
            case '&': out += "&amp;"; break;
            case '<': out += "&lt;"; break;
            case '>': out += "&gt;"; break;
            case '"': out += "&quot;"; break;
            case '\'': out += "&#39;"; break;
            default: out += c;
        }
    }
    return out;
}

std::string csv_field(const std::string& s) {
    if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
    std::string out = "\"";
    for (char c : s) {
        if (c == '"') out += '"';
        out += c;
    }
    return out + "\"";
}

std::vector<double> read_values(const std::filesystem::path& file) {
    std::ifstream in(file);
    std::vector<double> out;
    std::string line;
    while (std::getline(in, line)) {
        double v = 0;
        auto r = std::from_chars(line.data(), line.data() + line.size(), v);
        if (r.ec == std::errc{} && r.ptr == line.data() + line.size()) out.push_back(v);
    }
    return out;
}

double mean(const std::vector<double>& v) {
    double s = 0;
    std::size_t n = 0;
    for (double x : v)
        if (std::isfinite(x)) s += x, ++n;
    return n ? s / static_cast<double>(n) : std::numeric_limits<double>::quiet_NaN();
}

constexpr const char* kSplitColor[] = {"#1f77b4", "#ff7f0e", "#2ca02c"};  // train, valid, other

const char* split_color(const std::string& split) {
    if (split == "train") return kSplitColor[0];
    if (split == "valid") return kSplitColor[1];
    return kSplitColor[2];
}

// One chart: every split's values of `metric` against the epoch.
std::string chart(const RunMetrics& metrics, const std::string& metric) {
    constexpr double W = 760, H = 300, L = 64, R = 16, T = 16, B = 40;
    std::size_t epochs = 0;
    double lo = std::numeric_limits<double>::infinity(), hi = -lo;
    for (const auto& [split, by_metric] : metrics) {
        auto it = by_metric.find(metric);
        if (it == by_metric.end()) continue;
        epochs = std::max(epochs, it->second.epochs.size());
        for (const auto& e : it->second.epochs)
            for (double v : e)
                if (std::isfinite(v)) lo = std::min(lo, v), hi = std::max(hi, v);
    }
    if (!(lo <= hi)) return "<p>No finite values.</p>\n";
    if (hi - lo < 1e-12 * std::max(1.0, std::abs(hi))) lo -= 0.5, hi += 0.5;
    const double pad = (hi - lo) * 0.05;
    lo -= pad, hi += pad;
    const double ex = static_cast<double>(std::max<std::size_t>(epochs, 1));
    auto px = [&](double epoch_pos) { return L + (W - L - R) * epoch_pos / ex; };
    auto py = [&](double v) { return T + (H - T - B) * (hi - v) / (hi - lo); };

    std::string svg = "<svg class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" width=\"" +
                      exact(W) + "\" height=\"" + exact(H) + "\" viewBox=\"0 0 " + exact(W) +
                      " " + exact(H) + "\">\n";
    svg += "<rect x=\"" + exact(L) + "\" y=\"" + exact(T) + "\" width=\"" + exact(W - L - R) +
           "\" height=\"" + exact(H - T - B) + "\" fill=\"#fff\" stroke=\"#999\"/>\n";
    for (int i = 0; i <= 4; ++i) {  // value grid and labels
        const double v = lo + (hi - lo) * i / 4.0;
        const std::string y = exact(py(v));
        svg += "<line x1=\"" + exact(L) + "\" x2=\"" + exact(W - R) + "\" y1=\"" + y +
               "\" y2=\"" + y + "\" stroke=\"#eee\"/>";
        svg += "<text x=\"" + exact(L - 6) + "\" y=\"" + y +
               "\" text-anchor=\"end\" dominant-baseline=\"middle\" font-size=\"11\">" +
               short_num(v) + "</text>\n";
    }
    const std::size_t step = std::max<std::size_t>(1, epochs / 10);
    for (std::size_t e = 0; e <= epochs; e += step) {  // epoch ticks
        const std::string x = exact(px(static_cast<double>(e)));
        svg += "<line x1=\"" + x + "\" x2=\"" + x + "\" y1=\"" + exact(H - B) + "\" y2=\"" +
               exact(H - B + 4) + "\" stroke=\"#999\"/><text x=\"" + x + "\" y=\"" +
               exact(H - B + 16) + "\" text-anchor=\"middle\" font-size=\"11\">" +
               std::to_string(e) + "</text>\n";
    }
    svg += "<text x=\"" + exact(L + (W - L - R) / 2) + "\" y=\"" + exact(H - 6) +
           "\" text-anchor=\"middle\" font-size=\"12\">epoch</text>\n";

    for (const auto& [split, by_metric] : metrics) {
        auto it = by_metric.find(metric);
        if (it == by_metric.end()) continue;
        const auto& series = it->second.epochs;
        const std::string color = split_color(split);
        std::string iters, means, dots;
        for (std::size_t e = 0; e < series.size(); ++e) {
            const auto& vals = series[e];
            for (std::size_t i = 0; i < vals.size(); ++i) {
                if (!std::isfinite(vals[i])) continue;
                const double pos = static_cast<double>(e) +
                                   (static_cast<double>(i) + 0.5) / static_cast<double>(vals.size());
                iters += exact(px(pos)) + "," + exact(py(vals[i])) + " ";
            }
            const double m = mean(vals);
            if (std::isfinite(m)) {
                const std::string p = exact(px(static_cast<double>(e) + 0.5)) + "," + exact(py(m));
                means += p + " ";
                dots += "<circle class=\"mean\" cx=\"" + exact(px(static_cast<double>(e) + 0.5)) +
                        "\" cy=\"" + exact(py(m)) + "\" r=\"4\" fill=\"" + color + "\"/>";
            }
        }
        svg += "<g class=\"series\" data-split=\"" + html_escape(split) + "\">\n";
        if (!iters.empty())
            svg += "<polyline class=\"iterations\" points=\"" + iters + "\" fill=\"none\" stroke=\"" +
                   color + "\" stroke-opacity=\"0.45\" stroke-width=\"1.5\"/>\n";
        if (!means.empty())
            svg += "<polyline class=\"means\" points=\"" + means + "\" fill=\"none\" stroke=\"" +
                   color + "\" stroke-width=\"3\"/>\n" + dots + "\n";
        svg += "</g>\n";
    }
    return svg + "</svg>\n";
}

}  // namespace

RunMetrics read_run_metrics(const std::filesystem::path& artifact_dir) {
    RunMetrics out;
    for (const char* split : {"train", "valid"}) {
        const auto dir = artifact_dir / split;
        std::error_code ec;
        if (!std::filesystem::is_directory(dir, ec)) continue;
        auto& by_metric = out[split];
        for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
            const std::string name = entry.path().filename().string();
            if (!entry.is_directory() || name.rfind("epoch-", 0) != 0) continue;
            std::size_t epoch = 0;
            auto r = std::from_chars(name.data() + 6, name.data() + name.size(), epoch);
            if (r.ec != std::errc{} || r.ptr != name.data() + name.size() || epoch == 0) continue;
            for (const auto& f : std::filesystem::directory_iterator(entry.path(), ec)) {
                if (f.path().extension() != ".log" || !f.is_regular_file()) continue;
                auto values = read_values(f.path());
                if (values.empty()) continue;
                auto& s = by_metric[f.path().stem().string()];
                if (s.epochs.size() < epoch) s.epochs.resize(epoch);
                s.epochs[epoch - 1] = std::move(values);
            }
        }
        if (by_metric.empty()) out.erase(split);
    }
    return out;
}

std::string metrics_csv(const RunMetrics& metrics) {
    std::string out = "split,epoch,iteration,metric,value\n";
    for (const auto& [split, by_metric] : metrics)
        for (const auto& [metric, series] : by_metric)
            for (std::size_t e = 0; e < series.epochs.size(); ++e)
                for (std::size_t i = 0; i < series.epochs[e].size(); ++i)
                    out += csv_field(split) + "," + std::to_string(e + 1) + "," +
                           std::to_string(i + 1) + "," + csv_field(metric) + "," +
                           exact(series.epochs[e][i]) + "\n";
    return out;
}

std::string report_html(const RunMetrics& metrics, const std::string& title) {
    std::vector<std::string> names;  // every metric of any split, in name order
    for (const auto& [split, by_metric] : metrics)
        for (const auto& [metric, series] : by_metric)
            if (std::find(names.begin(), names.end(), metric) == names.end())
                names.push_back(metric);
    std::sort(names.begin(), names.end());

    std::string out =
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
        "<meta http-equiv=\"refresh\" content=\"30\">\n<title>" +
        html_escape(title) +
        "</title>\n<style>body{font-family:sans-serif;margin:24px;color:#222}"
        "table{border-collapse:collapse;margin:8px 0 32px}td,th{border:1px solid #ccc;"
        "padding:2px 8px;text-align:right}.key{display:inline-block;width:24px;height:4px;"
        "vertical-align:middle;margin:0 4px 0 12px}</style>\n</head><body>\n<h1>" +
        html_escape(title) + "</h1>\n<p>";
    for (const auto& [split, by_metric] : metrics)
        out += "<span class=\"key\" style=\"background:" + std::string(split_color(split)) +
               "\"></span>" + html_escape(split);
    out += " &mdash; thin: every iteration; thick: the epoch's mean. The page reloads every "
           "30 s during a run.</p>\n";
    if (names.empty()) out += "<p>No numeric metric has been logged yet.</p>\n";
    for (const std::string& metric : names) {
        out += "<h2>" + html_escape(metric) + "</h2>\n" + chart(metrics, metric);
        std::size_t epochs = 0;
        for (const auto& [split, by_metric] : metrics)
            if (auto it = by_metric.find(metric); it != by_metric.end())
                epochs = std::max(epochs, it->second.epochs.size());
        out += "<table><tr><th>epoch</th>";
        for (const auto& [split, by_metric] : metrics)
            if (by_metric.count(metric)) out += "<th>" + html_escape(split) + " mean</th>";
        out += "</tr>\n";
        for (std::size_t e = 0; e < epochs; ++e) {
            out += "<tr><td>" + std::to_string(e + 1) + "</td>";
            for (const auto& [split, by_metric] : metrics) {
                auto it = by_metric.find(metric);
                if (it == by_metric.end()) continue;
                const auto& ep = it->second.epochs;
                const double m = e < ep.size() ? mean(ep[e]) : std::nan("");
                out += "<td>" + (std::isfinite(m) ? short_num(m) : std::string("&ndash;")) + "</td>";
            }
            out += "</tr>\n";
        }
        out += "</table>\n";
    }
    return out + "</body></html>\n";
}

void write_report(const std::filesystem::path& artifact_dir) {
    std::error_code ec;
    std::filesystem::create_directories(artifact_dir, ec);
    EMBER_CHECK(!ec, Argument, "write_report: cannot create '", artifact_dir.string(),
                "': ", ec.message());
    const RunMetrics metrics = read_run_metrics(artifact_dir);
    const std::string csv = metrics_csv(metrics);
    auto dir = artifact_dir;  // "runs/a/" names the run "a", as "runs/a" does
    if (dir.filename().empty()) dir = dir.parent_path();
    const std::string html = report_html(metrics, "ember training report: " +
                                                      dir.filename().string());
    auto bytes = [](const std::string& s) {
        return std::span<const std::byte>(reinterpret_cast<const std::byte*>(s.data()), s.size());
    };
    record::detail::write_bytes_atomic(artifact_dir / "metrics.csv", bytes(csv), "metrics CSV");
    record::detail::write_bytes_atomic(artifact_dir / "report.html", bytes(html), "training report");
}

}  // namespace ember::train
