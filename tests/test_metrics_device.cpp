// CudaMetric and CpuTemperature: a made-up sysfs tree for the temperature (the numbers are the
// files' millidegrees), "unavailable" where NVML or the sensors are absent, and, on a machine
// with a GPU driver, the real GPUs' line (skipped with a warning elsewhere).
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <ember/train/device_metrics.hpp>
#include <filesystem>
#include <fstream>

namespace test_metrics_device {

namespace {

namespace fs = std::filesystem;
namespace train = ember::train;

struct SysTree {
    fs::path root = fs::temp_directory_path() / ("ember-sysfs-" + std::to_string(::getpid()));
    SysTree() { fs::remove_all(root); }
    ~SysTree() { fs::remove_all(root); }
    void write(const fs::path& rel, const std::string& text) const {
        fs::create_directories((root / rel).parent_path());
        std::ofstream(root / rel) << text << "\n";
    }
};

}  // namespace

TEST_CASE("CpuTemperature: the hottest CPU sensor, or unavailable", "[metrics]") {
    static_assert(train::Numeric<train::CpuTemperature>);
    SysTree t;
    train::CpuTemperature temp(t.root);
    CHECK(temp.name() == "CPU Temperature");
    // Nothing there: no number is made up.
    auto none = temp.update({}, {});
    CHECK(none.formatted == "unavailable");
    CHECK_FALSE(none.numeric.has_value());
    CHECK(std::isnan(temp.value()));
    // A thermal zone that is not the CPU (ACPI, Wi-Fi) is not read.
    t.write("thermal/thermal_zone0/type", "acpitz");
    t.write("thermal/thermal_zone0/temp", "27800");
    CHECK(temp.update({}, {}).formatted == "unavailable");
    // A CPU package zone is.
    t.write("thermal/thermal_zone1/type", "x86_pkg_temp");
    t.write("thermal/thermal_zone1/temp", "51000");
    auto zone = temp.update({}, {});
    CHECK(*zone.numeric == Approx(51.0));
    CHECK(zone.formatted == "51.0 °C");
    // A CPU hwmon device wins over the zones: the hottest of its inputs (not its limits).
    t.write("hwmon/hwmon0/name", "nvme");
    t.write("hwmon/hwmon0/temp1_input", "70000");
    t.write("hwmon/hwmon1/name", "coretemp");
    t.write("hwmon/hwmon1/temp1_input", "45000");
    t.write("hwmon/hwmon1/temp2_input", "47500");
    t.write("hwmon/hwmon1/temp2_crit", "100000");
    CHECK(*temp.update({}, {}).numeric == Approx(47.5));
    CHECK(temp.value() == Approx(47.5));
    // An unreadable value is skipped, not read as 0.
    t.write("hwmon/hwmon1/temp2_input", "garbage");
    CHECK(*temp.update({}, {}).numeric == Approx(45.0));
}

TEST_CASE("CudaMetric: GPUs through NVML, unavailable without it", "[metrics]") {
    static_assert(train::Metric<train::CudaMetric>);
    static_assert(!train::Numeric<train::CudaMetric>);  // a text metric, as Burn's
    train::CudaMetric missing("libember-no-such-nvml.so");
    CHECK_FALSE(missing.available());
    auto e = missing.update({}, {});
    CHECK(e.name == "CUDA");
    CHECK(e.formatted.rfind("unavailable (", 0) == 0);
    CHECK_FALSE(e.numeric.has_value());
    train::CudaMetric gpus;
    if (!gpus.available()) {
        WARN("skipped: no NVML (" << gpus.update({}, {}).formatted << ")");
        return;
    }
    const auto text = gpus.update({}, {}).formatted;
    INFO(text);
    CHECK((text.rfind("GPU #0 - Usage ", 0) == 0 || text == "unavailable (no GPU)"));
}

}  // namespace test_metrics_device
