// The bundled metrics' non-template parts: formatting, accuracy counting, /proc parsing.
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include <ember/train/metrics.hpp>

namespace ember::train {

namespace {

std::string format_value(double v, int precision, const std::string& unit) {
    char buf[64];
    if (precision < 0)
        std::snprintf(buf, sizeof buf, "%.*e", -precision, v);
    else
        std::snprintf(buf, sizeof buf, "%.*f", precision, v);
    return buf + unit;
}

double steady_seconds() {
    using namespace std::chrono;
    return duration<double>(steady_clock::now().time_since_epoch()).count();
}

}  // namespace

MetricEntry NumericMetricState::update(const std::string& name, double value,
                                       std::size_t batch_size, int precision,
                                       const std::string& unit) {
    value_ = value;
    sum_ += value * double(batch_size);
    count_ += batch_size;
    const double m = mean();
    return MetricEntry{name, format_value(value, precision, unit), value, m};
}

namespace detail {

std::pair<std::size_t, std::size_t> topk_correct(const TensorData& outputs,
                                                 const TensorData& targets, std::size_t k,
                                                 std::optional<std::size_t> pad,
                                                 const char* metric) {
    const Shape& os = outputs.shape();
    EMBER_CHECK(os.rank() == 2, Shape, metric, ": outputs must be [N, C], got ", os.to_string());
    const std::size_t n = os[0], c = os[1];
    EMBER_CHECK(targets.num_elements() == n, Shape, metric, ": ", targets.num_elements(),
                " targets for outputs of shape ", os.to_string());
    const auto scores = outputs.to_vec<double>();
    const auto ts = targets.to_vec<std::int64_t>();
    std::size_t correct = 0, total = 0;
    for (std::size_t i = 0; i < n; ++i) {
        const std::int64_t t = ts[i];
        if (pad && t >= 0 && std::size_t(t) == *pad) continue;
        EMBER_CHECK(t >= 0 && std::size_t(t) < c, Index, metric, ": target ", t, " of item ", i,
                    " is outside the ", c, " classes");
        ++total;
        const double* row = scores.data() + i * c;
        // The target is among the k best when fewer than k classes score strictly higher.
        std::size_t higher = 0;
        for (std::size_t j = 0; j < c; ++j) higher += row[j] > row[t];
        correct += higher < k;
    }
    return {correct, total};
}

std::string read_text(const std::string& path, const char* metric) {
    std::ifstream in(path, std::ios::binary);
    EMBER_CHECK(in.good(), Format, metric, ": cannot read '", path, "'");
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

CpuTimes parse_proc_stat(const std::string& text, const std::string& source) {
    std::istringstream in(text);
    std::string label;
    in >> label;
    EMBER_CHECK(label == "cpu", Format, "CpuUsage: '", source,
                "' does not start with the aggregate \"cpu\" line");
    std::uint64_t f[8] = {};
    int read = 0;
    for (; read < 8 && (in >> f[read]); ++read) {
    }
    EMBER_CHECK(read >= 4, Format, "CpuUsage: '", source, "' has ", read,
                " fields on its cpu line, expected at least 4");
    // user nice system idle iowait irq softirq steal: idle and iowait are not busy.
    CpuTimes t;
    t.busy = f[0] + f[1] + f[2] + f[5] + f[6] + f[7];
    t.total = t.busy + f[3] + f[4];
    return t;
}

std::pair<std::uint64_t, std::uint64_t> parse_meminfo(const std::string& text,
                                                      const std::string& source) {
    std::istringstream in(text);
    std::string line;
    std::optional<std::uint64_t> total, available;
    while (std::getline(in, line)) {
        std::istringstream ls(line);
        std::string key;
        std::uint64_t kb = 0;
        if (!(ls >> key >> kb)) continue;
        if (key == "MemTotal:") total = kb * 1024;
        if (key == "MemAvailable:") available = kb * 1024;
    }
    EMBER_CHECK(total && available, Format, "CpuMemory: '", source,
                "' lacks MemTotal or MemAvailable");
    return {*total, *available};
}

}  // namespace detail

MetricEntry LearningRateMetric::update(const Input&, const MetricMetadata& md) {
    if (!md.lr) return MetricEntry{name(), "-", std::nullopt, std::nullopt};
    return state_.update(name(), *md.lr, 1, -3);
}

CpuUsage::CpuUsage(std::string path, double min_interval_s)
    : path_(std::move(path)), min_interval_(min_interval_s) {
    EMBER_CHECK(min_interval_s >= 0, Argument, "CpuUsage: min_interval_s must be >= 0, got ",
                min_interval_s);
    last_ = detail::parse_proc_stat(detail::read_text(path_, "CpuUsage"), path_);
    last_time_ = steady_seconds();
}

MetricEntry CpuUsage::update(const Input&, const MetricMetadata&) {
    const double now = steady_seconds();
    if (now - last_time_ >= min_interval_) {
        const auto t = detail::parse_proc_stat(detail::read_text(path_, "CpuUsage"), path_);
        // Counters only grow; a total that did not move leaves the last value.
        if (t.total > last_.total) {
            const auto busy = t.busy >= last_.busy ? t.busy - last_.busy : 0;
            usage_ = 100.0 * double(busy) / double(t.total - last_.total);
        }
        last_ = t;
        last_time_ = now;
    }
    return state_.update(name(), usage_, 1, 2, " %");
}

MetricEntry CpuMemory::update(const Input&, const MetricMetadata&) {
    const auto [total, available] =
        detail::parse_meminfo(detail::read_text(path_, "CpuMemory"), path_);
    const double used = double(total - std::min(total, available)) / 1e9;
    MetricEntry e = state_.update(name(), used, 1, 2);
    e.formatted =
        format_value(used, 2, "") + " / " + format_value(double(total) / 1e9, 2, "") + " GB";
    return e;
}

IterationSpeedMetric::IterationSpeedMetric(std::function<double()> clock)
    : clock_(clock ? std::move(clock) : std::function<double()>(steady_seconds)) {}

MetricEntry IterationSpeedMetric::update(const Input&, const MetricMetadata& md) {
    const double now = clock_();
    double speed = 0;
    if (!start_)
        start_ = now;
    else if (now > *start_)
        speed = double(md.progress.items_processed) / (now - *start_);
    return state_.update(name(), speed, 1, 2, " items/s");
}

}  // namespace ember::train
