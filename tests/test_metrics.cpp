// The bundled metrics, checked against values worked out by hand.
#include <unistd.h>
#include <catch2/catch.hpp>
#include <cstdio>
#include <ember/ember.hpp>
#include <ember/train/output.hpp>
#include <filesystem>
#include <fstream>

namespace test_metrics {

namespace {

using ember::Cpu;
using ember::Int;
using ember::Tensor;
using ember::TensorData;
namespace train = ember::train;

Tensor<Cpu, 2> scores(std::vector<float> v, std::size_t n, std::size_t c) {
    return Tensor<Cpu, 2>::from_data(TensorData(v, {n, c}), {});
}
Tensor<Cpu, 1, Int> labels(std::vector<std::int64_t> v) {
    const std::size_t n = v.size();
    return Tensor<Cpu, 1, Int>::from_data(TensorData(v, {n}), {});
}

// 4 items, 3 classes. Best class per row: 1, 0, 2, 1. The target's rank: row 0 first, row 1
// first, row 2 third (0.3 and 0.5 beat 0.2), row 3 second (only 0.4 beats 0.3).
train::AccuracyInput<Cpu> batch() {
    return {scores({0.1f, 0.7f, 0.2f,  //
                    0.5f, 0.3f, 0.2f,  //
                    0.2f, 0.3f, 0.5f,  //
                    0.3f, 0.4f, 0.3f},
                   4, 3),
            labels({1, 0, 0, 2})};
}

struct TempFile {
    std::filesystem::path path = std::filesystem::temp_directory_path() /
                                 ("ember-metrics-" + std::to_string(::getpid()) + ".txt");
    void write(const std::string& text) const { std::ofstream(path) << text; }
    ~TempFile() { std::filesystem::remove(path); }
};

// A metric of one's own: counts items through its own input type.
struct CountInput {
    std::size_t n;
};
struct ItemCount {
    using Input = CountInput;
    std::size_t total = 0;
    train::MetricEntry update(const Input& in, const train::MetricMetadata&) {
        total += in.n;
        return {name(), std::to_string(total), double(total), std::nullopt};
    }
    void clear() { total = 0; }
    std::string name() const { return "Items"; }
    double value() const { return double(total); }
};

}  // namespace

}  // namespace test_metrics

template <>
struct ember::train::Adaptor<ember::train::ClassificationOutput<ember::Cpu>,
                             test_metrics::CountInput> {
    static test_metrics::CountInput adapt(const ClassificationOutput<Cpu>& o) {
        return {o.targets.dims()[0]};
    }
};

namespace test_metrics {

TEST_CASE("metric concepts and adaptors", "[metrics]") {
    static_assert(train::Numeric<train::AccuracyMetric<Cpu>>);
    static_assert(train::Numeric<train::TopKAccuracyMetric<Cpu>>);
    static_assert(train::Numeric<train::LossMetric<Cpu>>);
    static_assert(train::Numeric<train::LearningRateMetric>);
    static_assert(train::Numeric<train::CpuUsage>);
    static_assert(train::Numeric<train::CpuMemory>);
    static_assert(train::Numeric<train::IterationSpeedMetric>);
    static_assert(train::Numeric<ItemCount>);
    using C = train::ClassificationOutput<Cpu>;
    using R = train::RegressionOutput<Cpu>;
    static_assert(train::AdaptsTo<C, train::AccuracyInput<Cpu>>);
    static_assert(train::AdaptsTo<C, train::TopKAccuracyInput<Cpu>>);
    static_assert(train::AdaptsTo<C, train::LossInput<Cpu>>);
    static_assert(train::AdaptsTo<C, CountInput>);
    static_assert(train::AdaptsTo<R, train::LossInput<Cpu>>);
    static_assert(train::AdaptsTo<R, train::NoInput>);
    static_assert(!train::AdaptsTo<R, train::AccuracyInput<Cpu>>);

    C out{Tensor<Cpu, 1>::from_data(TensorData({0.25f}, {1}), {}), batch().outputs,
          batch().targets};
    train::MetricMetadata md;
    train::LossMetric<Cpu> loss;
    CHECK(loss.update(train::Adaptor<C, train::LossInput<Cpu>>::adapt(out), md).numeric == 0.25);
    ItemCount count;
    CHECK(count.update(train::Adaptor<C, CountInput>::adapt(out), md).formatted == "4");
}

TEST_CASE("AccuracyMetric and TopKAccuracyMetric", "[metrics]") {
    train::MetricMetadata md;
    SECTION("accuracy: 2 of 4 best classes are the targets") {
        train::AccuracyMetric<Cpu> acc;
        auto e = acc.update(batch(), md);
        CHECK(e.name == "Accuracy");
        CHECK(*e.numeric == Approx(50.0));
        CHECK(e.formatted == "50.00 %");
        CHECK(acc.value() == Approx(50.0));
        // A second batch of 2, both right: the epoch mean is weighted by items, (2 + 2) / 6.
        auto e2 = acc.update({scores({1, 0, 0, 0, 1, 0}, 2, 3), labels({0, 1})}, md);
        CHECK(*e2.numeric == Approx(100.0));
        CHECK(*e2.epoch_mean == Approx(400.0 / 6.0));
        acc.clear();
        CHECK(*acc.update(batch(), md).epoch_mean == Approx(50.0));
    }
    SECTION("a pad token leaves its items out: 2 right of the 3 others") {
        auto acc = train::AccuracyMetric<Cpu>{}.with_pad_token(2);
        CHECK(*acc.update(batch(), md).numeric == Approx(200.0 / 3.0));
    }
    SECTION("top-2: rows 0, 1 and 3") {
        train::TopKAccuracyMetric<Cpu> top2(2);
        auto b = batch();
        auto e = top2.update({b.outputs, b.targets}, md);
        CHECK(e.name == "Top-2 Accuracy");
        CHECK(*e.numeric == Approx(75.0));
        // Pad token 0 drops rows 1 and 2; rows 0 and 3 are in the top 2.
        auto padded = train::TopKAccuracyMetric<Cpu>(2).with_pad_token(0);
        CHECK(*padded.update({b.outputs, b.targets}, md).numeric == Approx(100.0));
        // Top-3 of 3 classes: everything.
        train::TopKAccuracyMetric<Cpu> top3(3);
        CHECK(*top3.update({b.outputs, b.targets}, md).numeric == Approx(100.0));
    }
    SECTION("errors") {
        train::AccuracyMetric<Cpu> acc;
        CHECK_THROWS_AS(acc.update({scores({0, 1}, 1, 2), labels({0, 1})}, md), ember::ShapeError);
        CHECK_THROWS_AS(acc.update({scores({0, 1}, 1, 2), labels({2})}, md), ember::IndexError);
        CHECK_THROWS_AS(train::TopKAccuracyMetric<Cpu>(0), ember::ArgumentError);
        train::TopKAccuracyMetric<Cpu> top5(5);
        auto b = batch();
        CHECK_THROWS_AS(top5.update({b.outputs, b.targets}, md), ember::ArgumentError);
    }
}

TEST_CASE("LossMetric and LearningRateMetric", "[metrics]") {
    train::MetricMetadata md;
    train::LossMetric<Cpu> loss;
    auto e = loss.update({Tensor<Cpu, 1>::from_data(TensorData({0.5f}, {1}), {})}, md);
    CHECK(e.name == "Loss");
    CHECK(*e.numeric == 0.5);
    CHECK(e.formatted == "0.5000");
    e = loss.update({Tensor<Cpu, 1>::from_data(TensorData({1.5f}, {1}), {})}, md);
    CHECK(*e.epoch_mean == 1.0);  // (0.5 + 1.5) / 2 iterations
    // A per-item loss counts as its mean.
    CHECK(*loss.update({Tensor<Cpu, 1>::from_data(TensorData({1.f, 2.f, 3.f}, {3}), {})}, md)
               .numeric == 2.0);

    train::LearningRateMetric lr;
    md.lr = 0.01;
    e = lr.update({}, md);
    CHECK(*e.numeric == 0.01);
    CHECK(e.formatted == "1.000e-02");
    md.lr.reset();
    e = lr.update({}, md);
    CHECK_FALSE(e.numeric);
    CHECK(e.formatted == "-");
}

TEST_CASE("CpuUsage, CpuMemory and IterationSpeedMetric", "[metrics]") {
    train::MetricMetadata md;
    TempFile f;
    SECTION("CPU usage: busy jiffies over all jiffies between samples") {
        // busy = user + nice + system + irq + softirq + steal; idle and iowait are not.
        f.write("cpu  100 0 50 800 50 0 0 0 0 0\ncpu0 1 2 3 4\n");
        train::CpuUsage cpu(f.path.string(), 0.0);
        f.write("cpu  200 0 100 1500 100 0 0 0 0 0\n");  // busy +150, total +900
        auto e = cpu.update({}, md);
        CHECK(e.name == "CPU Usage");
        CHECK(*e.numeric == Approx(100.0 * 150.0 / 900.0));
        CHECK(e.formatted == "16.67 %");
    }
    SECTION("CPU memory: MemTotal - MemAvailable") {
        f.write("MemTotal:        2000000 kB\nMemFree:  100 kB\nMemAvailable:     500000 kB\n");
        train::CpuMemory mem(f.path.string());
        auto e = mem.update({}, md);
        CHECK(*e.numeric == Approx(1500000.0 * 1024 / 1e9));
        CHECK(e.formatted == "1.54 / 2.05 GB");
    }
    SECTION("the machine's own /proc files parse") {
        train::CpuUsage cpu;
        train::CpuMemory mem;
        auto u = cpu.update({}, md);
        CHECK(*u.numeric >= 0.0);
        CHECK(*u.numeric <= 100.0);
        CHECK(*mem.update({}, md).numeric > 0.0);
    }
    SECTION("unreadable or malformed files") {
        CHECK_THROWS_AS(train::CpuUsage("/nonexistent/stat"), ember::FormatError);
        f.write("intr 1 2 3\n");
        CHECK_THROWS_AS(train::CpuUsage(f.path.string()), ember::FormatError);
        f.write("MemTotal: 10 kB\n");
        train::CpuMemory mem(f.path.string());
        CHECK_THROWS_AS(mem.update({}, md), ember::FormatError);
    }
    SECTION("iteration speed: items since the epoch's first update over the time") {
        std::vector<double> times{10.0, 12.0, 14.0};
        std::size_t i = 0;
        train::IterationSpeedMetric speed([&] { return times[i++]; });
        md.progress.items_processed = 32;
        CHECK(*speed.update({}, md).numeric == 0.0);  // starts the clock
        md.progress.items_processed = 96;
        auto e = speed.update({}, md);
        CHECK(*e.numeric == Approx(48.0));
        CHECK(e.formatted == "48.00 items/s");
        speed.clear();
        CHECK(*speed.update({}, md).numeric == 0.0);  // a new epoch restarts the clock
    }
}

}  // namespace test_metrics
