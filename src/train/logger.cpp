// File metric logger and application logger.
#include <charconv>
#include <chrono>
#include <cstring>
#include <ctime>
#include <fstream>
#include <sstream>

#include <ember/record/recorder.hpp>
#include <ember/record/untrusted.hpp>
#include <ember/tensor/error.hpp>
#include <ember/train/logger.hpp>

namespace ember::train {

namespace {

std::string file_name(const std::string& metric) {
    std::string out = metric;
    for (char& c : out)
        if (c == ' ' || c == '/' || c == '\\') c = '_';
    return out + ".log";
}

// The shortest text that reads back as exactly `v`.
std::string exact(double v) {
    char buf[64];
    auto r = std::to_chars(buf, buf + sizeof buf, v);
    return std::string(buf, r.ptr);
}

}  // namespace

std::filesystem::path FileMetricLogger::file(const std::string& name, std::size_t epoch) const {
    return dir_ / ("epoch-" + std::to_string(epoch)) / file_name(name);
}

void FileMetricLogger::start_epoch(std::size_t epoch) {
    lines_.clear();
    // An interrupted attempt at this epoch may have left files: they describe iterations that
    // will run again, so they go.
    std::error_code ec;
    std::filesystem::remove_all(dir_ / ("epoch-" + std::to_string(epoch)), ec);
}

void FileMetricLogger::log(const MetricEntry& entry) {
    auto& text = lines_[entry.name];
    text += entry.numeric ? exact(*entry.numeric) : entry.formatted;
    text += '\n';
}

void FileMetricLogger::end_epoch(std::size_t epoch) {
    const auto dir = dir_ / ("epoch-" + std::to_string(epoch));
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    EMBER_CHECK(!ec, Argument, "FileMetricLogger: cannot create '", dir.string(),
                "': ", ec.message());
    for (const auto& [name, text] : lines_) {
        std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(text.data()),
                                         text.size());
        record::detail::write_bytes_atomic(file(name, epoch), bytes, "metric log");
    }
    lines_.clear();
}

std::optional<std::vector<double>> FileMetricLogger::read_numeric(const std::string& name,
                                                                  std::size_t epoch) const {
    // Through the regular-file rule: a FIFO or device in its place is not waited on or read
    // without end; what is not a readable log is treated as absent.
    std::string text;
    try {
        const auto bytes =
            record::detail::RegularFile(file(name, epoch), "a metric log").read_all();
        text.assign(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    } catch (const FormatError&) {
        return std::nullopt;
    }
    std::istringstream in(text);
    std::vector<double> out;
    std::string line;
    while (std::getline(in, line)) {
        double v = 0;
        auto r = std::from_chars(line.data(), line.data() + line.size(), v);
        if (r.ec != std::errc{} || r.ptr != line.data() + line.size()) return std::nullopt;
        out.push_back(v);
    }
    return out;
}

void FileApplicationLogger::log(std::string_view message) {
    if (file_.has_parent_path()) {
        std::error_code ec;
        std::filesystem::create_directories(file_.parent_path(), ec);
    }
    std::ofstream out(file_, std::ios::app);
    EMBER_CHECK(out.good(), Argument, "FileApplicationLogger: cannot write '", file_.string(), "'");
    const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
    std::tm tm{};
    localtime_r(&now, &tm);
    char stamp[32];
    std::strftime(stamp, sizeof stamp, "%Y-%m-%d %H:%M:%S", &tm);
    out << stamp << ' ' << message << '\n';
    out.flush();
    EMBER_CHECK(out.good(), Argument, "FileApplicationLogger: cannot write '", file_.string(), "'");
}

}  // namespace ember::train
