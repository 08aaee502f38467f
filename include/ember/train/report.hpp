#pragma once
// What a training run looks like, for people: `metrics.csv` (every numeric value the metric
// loggers wrote, one row each) and `report.html` (a self-contained page with the training and
// validation curves of every metric, drawn as inline SVG: no script, no network, no font or
// style sheet from elsewhere). Both are made from the files of the default metric loggers
// (`<artifact dir>/{train,valid}/epoch-N/<metric>.log`), so a resumed run's report holds its
// earlier epochs too, and both are rewritten whole (temporary file, then rename) at the end of
// every epoch: the page reloads itself every 30 s, so it can be watched during a run.
#include <cstddef>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "../export.hpp"

namespace ember::train {

/// The numeric values of one metric in one split: `epochs[e]` holds epoch e+1's values in
/// iteration order (empty for an epoch without a log).
struct MetricSeries {
    std::vector<std::vector<double>> epochs;  ///< per epoch, per iteration
};

/// Everything a report shows: split name ("train", "valid") → metric name → its series.
using RunMetrics = std::map<std::string, std::map<std::string, MetricSeries>>;

/// Reads the metric logs under `artifact_dir` (`train/` and `valid/`, as FileMetricLogger
/// writes them). Lines that are not numbers (text metrics) are left out; a missing directory
/// gives an empty split.
EMBER_API RunMetrics read_run_metrics(const std::filesystem::path& artifact_dir);

/// The CSV text of `metrics`: a header `split,epoch,iteration,metric,value`, then one row per
/// value (epochs and iterations from 1; values as the shortest text that reads back exactly;
/// names quoted as RFC 4180 says where they need it).
EMBER_API std::string metrics_csv(const RunMetrics& metrics);

/// The HTML page of `metrics`: one chart per metric, with each split's per-iteration values
/// (thin line) and epoch means (thick line with dots) against the epoch, and a table of the
/// epoch means. `title` heads the page (escaped).
EMBER_API std::string report_html(const RunMetrics& metrics, const std::string& title);

/// Reads the logs of `artifact_dir` and writes `metrics.csv` and `report.html` there
/// atomically. ember::Error (Argument) naming the file when one cannot be written.
EMBER_API void write_report(const std::filesystem::path& artifact_dir);

}  // namespace ember::train
