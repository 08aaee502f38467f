// The training report: metrics.csv and report.html made from the metric logs (report.hpp).
// Expected values are the logged ones and their means, computed here by hand.
#include <unistd.h>
#include <ember/train/logger.hpp>
#include <ember/train/report.hpp>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include "harness.hpp"

namespace test_report {

namespace {

namespace fs = std::filesystem;
namespace train = ember::train;

struct ReportDir {
    fs::path path;
    explicit ReportDir(const std::string& name)
        : path(fs::temp_directory_path() /
               ("ember-report-" + name + "-" + std::to_string(::getpid()))) {
        fs::remove_all(path);
    }
    ~ReportDir() { fs::remove_all(path); }
};

using Values = std::vector<std::vector<double>>;  // [epoch][iteration]

// Logs every metric's `values[e][i]` through one FileMetricLogger, as the Learner does (a
// logger starting an epoch drops what an earlier attempt at it wrote, so one logger a split).
void log_epochs(const fs::path& dir, const std::vector<std::pair<std::string, Values>>& metrics) {
    train::FileMetricLogger logger(dir);
    for (std::size_t e = 0; e < metrics.front().second.size(); ++e) {
        logger.start_epoch(e + 1);
        for (const auto& [name, values] : metrics)
            for (double v : values[e]) {
                train::MetricEntry entry;
                entry.name = name;
                entry.numeric = v;
                entry.formatted = std::to_string(v);
                logger.log(entry);
            }
        logger.end_epoch(e + 1);
    }
}

std::string slurp(const fs::path& p) {
    std::ifstream in(p);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

std::size_t count(const std::string& text, const std::string& what) {
    std::size_t n = 0;
    for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
}

}  // namespace

TEST_CASE("report: metrics.csv holds every logged value", "[report]") {
    ReportDir dir("csv");
    log_epochs(dir.path / "train", {{"Loss", {{2.0, 1.5}, {1.0, 0.5}}}});
    log_epochs(dir.path / "valid", {{"Loss", {{1.75}, {0.25}}}});
    train::write_report(dir.path);
    CHECK(slurp(dir.path / "metrics.csv") ==
          "split,epoch,iteration,metric,value\n"
          "train,1,1,Loss,2\ntrain,1,2,Loss,1.5\ntrain,2,1,Loss,1\ntrain,2,2,Loss,0.5\n"
          "valid,1,1,Loss,1.75\nvalid,2,1,Loss,0.25\n");
}

TEST_CASE("report: read_run_metrics", "[report]") {
    ReportDir dir("read");
    SECTION("text metrics are left out, epochs keep their places") {
        log_epochs(dir.path / "train", {{"Acc", {{0.5, 0.75}}}});
        fs::create_directories(dir.path / "train" / "epoch-3");
        std::ofstream(dir.path / "train" / "epoch-3" / "Acc.log") << "0.25\n";
        std::ofstream(dir.path / "train" / "epoch-3" / "Note.log") << "all good\n";
        const auto m = train::read_run_metrics(dir.path);
        REQUIRE(m.count("train") == 1);
        CHECK(m.count("valid") == 0);
        const auto& acc = m.at("train").at("Acc").epochs;
        REQUIRE(acc.size() == 3);
        CHECK(acc[0] == std::vector<double>{0.5, 0.75});
        CHECK(acc[1].empty());
        CHECK(acc[2] == std::vector<double>{0.25});
        CHECK(m.at("train").count("Note") == 0);
    }
    SECTION("no logs, no directory yet: an empty report that says so") {
        train::write_report(dir.path);
        CHECK(slurp(dir.path / "metrics.csv") == "split,epoch,iteration,metric,value\n");
        CHECK(slurp(dir.path / "report.html").find("No numeric metric has been logged yet") !=
              std::string::npos);
    }
}

TEST_CASE("report: the page draws every metric of every split", "[report]") {
    ReportDir dir("html");
    log_epochs(dir.path / "train", {{"Loss", {{2.0, 1.0, 3.0}, {1.0, 0.5, 0.0}}},
                                    {"Accuracy", {{0.5, 0.5, 0.5}, {0.75, 0.75, 0.75}}}});
    log_epochs(dir.path / "valid", {{"Loss", {{1.5}, {0.75}}}});
    train::write_report(dir.path);
    const std::string html = slurp(dir.path / "report.html");

    SECTION("self-contained: nothing fetched, no script") {
        CHECK(html.rfind("<!DOCTYPE html>", 0) == 0);
        CHECK(html.find("<script") == std::string::npos);
        CHECK(html.find("src=") == std::string::npos);
        CHECK(html.find("href=") == std::string::npos);
        CHECK(html.find("http-equiv=\"refresh\"") != std::string::npos);
    }
    SECTION("one chart per metric, a line per split and view") {
        CHECK(count(html, "<svg class=\"chart\"") == 2);
        CHECK(count(html, "data-split=\"train\"") == 2);
        CHECK(count(html, "data-split=\"valid\"") == 1);
        CHECK(count(html, "class=\"iterations\"") == 3);
        CHECK(count(html, "class=\"means\"") == 3);
        CHECK(count(html, "class=\"mean\"") == 6);  // a dot per epoch mean
    }
    SECTION("the train Loss polyline has one point per iteration") {
        const std::regex line("data-split=\"train\">\\n<polyline class=\"iterations\" points=\"([^\"]*)\"");
        std::vector<std::size_t> points;
        for (auto it = std::sregex_iterator(html.begin(), html.end(), line);
             it != std::sregex_iterator(); ++it)
            points.push_back(count((*it)[1].str(), ","));
        CHECK(points == std::vector<std::size_t>{6, 6});  // Accuracy, then Loss: 2 epochs × 3
    }
    SECTION("the table gives each epoch's mean") {
        // Loss: train means 2 and 0.5, valid 1.5 and 0.75.
        CHECK(html.find("<tr><td>1</td><td>2</td><td>1.5</td></tr>") != std::string::npos);
        CHECK(html.find("<tr><td>2</td><td>0.5</td><td>0.75</td></tr>") != std::string::npos);
    }
}

TEST_CASE("report: names from the logs are escaped", "[report]") {
    ReportDir dir("escape");
    log_epochs(dir.path / "train", {{"<b>x&y</b>", {{1.0}}}, {"a,\"b\"", {{2.0}}}});
    train::write_report(dir.path);
    const std::string html = slurp(dir.path / "report.html");
    CHECK(html.find("<b>x") == std::string::npos);
    CHECK(html.find("&lt;b&gt;x&amp;y&lt;_b&gt;") != std::string::npos);  // '/' became '_' in the file name
    CHECK(slurp(dir.path / "metrics.csv").find("train,1,1,\"a,\"\"b\"\"\",2\n") != std::string::npos);
}

}  // namespace test_report
