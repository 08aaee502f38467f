// Writes the metric logs of a made-up 4-epoch run into a directory and its report
// (metrics.csv, report.html): what tests/report_browser.py opens in headless Chromium.
//   report_demo DIR
#include <cmath>
#include <cstdio>
#include <ember/train/logger.hpp>
#include <ember/train/report.hpp>

int main(int argc, char** argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: report_demo DIR\n");
        return 2;
    }
    namespace train = ember::train;
    const std::filesystem::path dir = argv[1];
    train::FileMetricLogger train_log(dir / "train"), valid_log(dir / "valid");
    auto entry = [](const char* name, double v) {
        train::MetricEntry e;
        e.name = name;
        e.numeric = v;
        e.formatted = std::to_string(v);
        return e;
    };
    for (std::size_t epoch = 1; epoch <= 4; ++epoch) {
        train_log.start_epoch(epoch);
        for (int i = 0; i < 50; ++i) {
            const double t = static_cast<double>(epoch - 1) + i / 50.0;
            train_log.log(entry("Loss", 2.0 * std::exp(-t) + 0.1 * std::sin(7.0 * i)));
            train_log.log(entry("Accuracy", 100.0 * (1.0 - 0.6 * std::exp(-t))));
        }
        train_log.end_epoch(epoch);
        valid_log.start_epoch(epoch);
        for (int i = 0; i < 10; ++i) {
            const double t = static_cast<double>(epoch);
            valid_log.log(entry("Loss", 2.2 * std::exp(-t) + 0.02 * i));
            valid_log.log(entry("Accuracy", 100.0 * (1.0 - 0.65 * std::exp(-t))));
        }
        valid_log.end_epoch(epoch);
    }
    train::write_report(dir);
    std::printf("%s\n", (dir / "report.html").c_str());
}
