#pragma once
// Machine metrics beyond CPU use and memory (metrics.hpp): the GPUs' utilisation and memory
// (CudaMetric, through NVML) and the CPU's temperature (CpuTemperature, from sysfs). Both report
// "unavailable" where the machine does not tell, rather than a number: no GPU or no driver, no
// thermal sensor (containers, most virtual machines).
#include <dlfcn.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "metric.hpp"

namespace ember::train {

namespace detail {

/// The few NVML entry points CudaMetric calls, resolved from the driver's libnvidia-ml at run
/// time: nothing links against it, so a build without CUDA (or a machine without a driver) still
/// compiles and runs, and the metric says the GPUs are unavailable. The signatures are those of
/// NVML's C API (nvml.h), which has kept them since CUDA 5.
class Nvml {
  public:
    /// Utilisation in percent over the driver's last sample period.
    struct Utilization {
        unsigned int gpu;     ///< % of time a kernel ran
        unsigned int memory;  ///< % of time memory was read or written
    };
    /// Device memory in bytes.
    struct Memory {
        unsigned long long total;  ///< on the board
        unsigned long long free;   ///< not allocated
        unsigned long long used;   ///< allocated
    };

    /// Loads `library` and initialises NVML; available() is false when either fails.
    explicit Nvml(const std::string& library) {
        handle_ = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
        if (!handle_) {
            const char* e = dlerror();
            reason_ = e ? e : ("cannot load " + library);
            return;
        }
        init_ = sym<Init>("nvmlInit_v2");
        shutdown_ = sym<Shutdown>("nvmlShutdown");
        count_ = sym<Count>("nvmlDeviceGetCount_v2");
        by_index_ = sym<ByIndex>("nvmlDeviceGetHandleByIndex_v2");
        util_ = sym<Util>("nvmlDeviceGetUtilizationRates");
        mem_ = sym<Mem>("nvmlDeviceGetMemoryInfo");
        if (!init_ || !shutdown_ || !count_ || !by_index_ || !util_ || !mem_) {
            reason_ = library + " lacks the NVML functions CudaMetric needs";
            return;
        }
        if (int rc = init_(); rc != 0) {
            reason_ = "nvmlInit failed with code " + std::to_string(rc);
            return;
        }
        initialised_ = true;
    }
    Nvml(const Nvml&) = delete;
    Nvml& operator=(const Nvml&) = delete;
    ~Nvml() {
        if (initialised_) shutdown_();
        if (handle_) dlclose(handle_);
    }
    /// Whether NVML answered.
    bool available() const { return initialised_; }
    /// Why it is not available.
    const std::string& reason() const { return reason_; }
    /// The number of GPUs (0 when NVML fails).
    unsigned int device_count() const {
        unsigned int n = 0;
        return count_(&n) == 0 ? n : 0;
    }
    /// Device `i`'s utilisation and memory; nullopt when NVML cannot tell.
    std::optional<std::pair<Utilization, Memory>> query(unsigned int i) const {
        void* dev = nullptr;
        Utilization u{};
        Memory m{};
        if (by_index_(i, &dev) != 0 || util_(dev, &u) != 0 || mem_(dev, &m) != 0)
            return std::nullopt;
        return std::pair{u, m};
    }

  private:
    using Init = int (*)();
    using Shutdown = int (*)();
    using Count = int (*)(unsigned int*);
    using ByIndex = int (*)(unsigned int, void**);
    using Util = int (*)(void*, Utilization*);
    using Mem = int (*)(void*, Memory*);
    template <typename F>
    F sym(const char* name) {
        return reinterpret_cast<F>(dlsym(handle_, name));
    }
    void* handle_ = nullptr;
    bool initialised_ = false;
    std::string reason_;
    Init init_ = nullptr;
    Shutdown shutdown_ = nullptr;
    Count count_ = nullptr;
    ByIndex by_index_ = nullptr;
    Util util_ = nullptr;
    Mem mem_ = nullptr;
};

/// The first line of a sysfs file, nullopt when it cannot be read.
inline std::optional<std::string> read_sysfs_line(const std::filesystem::path& p) {
    std::ifstream f(p);
    std::string line;
    if (!f || !std::getline(f, line)) return std::nullopt;
    while (!line.empty() && (line.back() == '\n' || line.back() == ' ')) line.pop_back();
    return line;
}

/// A sysfs temperature (millidegrees Celsius) in degrees; nullopt when unreadable.
inline std::optional<double> read_millidegrees(const std::filesystem::path& p) {
    const auto line = read_sysfs_line(p);
    if (!line || line->empty()) return std::nullopt;
    char* end = nullptr;
    const double v = std::strtod(line->c_str(), &end);
    if (end == line->c_str() || !std::isfinite(v)) return std::nullopt;
    return v / 1000.0;
}

/// The entries of `dir` whose names start with `prefix`, sorted; none when it does not exist.
inline std::vector<std::filesystem::path> sysfs_entries(const std::filesystem::path& dir,
                                                        const std::string& prefix) {
    std::vector<std::filesystem::path> out;
    std::error_code ec;
    for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
        if (it->path().filename().string().rfind(prefix, 0) == 0) out.push_back(it->path());
    std::sort(out.begin(), out.end());
    return out;
}

/// The CPU temperature under a sysfs `root` (/sys/class), in degrees Celsius: the hottest
/// sensor of a CPU hwmon device (coretemp, k10temp, zenpower, cpu_thermal), else the hottest
/// thermal zone of a CPU type (x86_pkg_temp or a type naming the cpu); nullopt when there is
/// none. Other zones (acpitz, wifi, battery) are not the CPU and are not read.
inline std::optional<double> cpu_temperature(const std::filesystem::path& root) {
    std::optional<double> best;
    auto take = [&](std::optional<double> t) {
        if (t && (!best || *t > *best)) best = t;
    };
    for (const auto& dev : sysfs_entries(root / "hwmon", "hwmon")) {
        const auto name = read_sysfs_line(dev / "name");
        if (!name || (*name != "coretemp" && *name != "k10temp" && *name != "zenpower" &&
                      *name != "cpu_thermal"))
            continue;
        for (const auto& f : sysfs_entries(dev, "temp")) {
            const std::string fn = f.filename().string();
            if (fn.size() > 6 && fn.compare(fn.size() - 6, 6, "_input") == 0)
                take(read_millidegrees(f));
        }
    }
    if (best) return best;
    for (const auto& zone : sysfs_entries(root / "thermal", "thermal_zone")) {
        auto type = read_sysfs_line(zone / "type");
        if (!type) continue;
        std::transform(type->begin(), type->end(), type->begin(),
                       [](unsigned char c) { return char(std::tolower(c)); });
        if (*type == "x86_pkg_temp" || type->find("cpu") != std::string::npos)
            take(read_millidegrees(zone / "temp"));
    }
    return best;
}

inline std::string format_fixed(double v, int decimals) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
    return buf;
}

}  // namespace detail

/// The GPUs' utilisation and memory, shown as text — "GPU #0 - Usage 35 % | Memory 1.20 / 79.65
/// GB" per device, separated by "; " (Burn's CudaMetric) — read through NVML from the driver's
/// libnvidia-ml.so.1 at each update. Where the library, the driver or a GPU is missing it
/// reports "unavailable (<why>)": a text metric for metric_train / metric_valid, not a numeric
/// one.
class CudaMetric {
  public:
    /// Loads NVML from `library`; never throws: available() says whether it answered.
    explicit CudaMetric(const std::string& library = "libnvidia-ml.so.1")
        : nvml_(std::make_shared<detail::Nvml>(library)) {}
    /// The input: nothing.
    using Input = NoInput;
    /// The GPUs' current utilisation and memory, or "unavailable (<why>)".
    MetricEntry update(const Input&, const MetricMetadata&) {
        if (!nvml_->available())
            return MetricEntry{name(), "unavailable (" + nvml_->reason() + ")", {}, {}};
        const unsigned int n = nvml_->device_count();
        if (n == 0) return MetricEntry{name(), "unavailable (no GPU)", {}, {}};
        std::string text;
        for (unsigned int i = 0; i < n; ++i) {
            if (i) text += "; ";
            text += "GPU #" + std::to_string(i) + " - ";
            if (const auto q = nvml_->query(i))
                text += "Usage " + std::to_string(q->first.gpu) + " % | Memory " +
                        detail::format_fixed(double(q->second.used) / 1e9, 2) + " / " +
                        detail::format_fixed(double(q->second.total) / 1e9, 2) + " GB";
            else
                text += "unavailable";
        }
        return MetricEntry{name(), text, {}, {}};
    }
    /// Nothing kept between epochs.
    void clear() {}
    /// "CUDA".
    std::string name() const { return "CUDA"; }
    /// Whether NVML answered (the library loaded and the driver initialised).
    bool available() const { return nvml_->available(); }

  private:
    std::shared_ptr<detail::Nvml> nvml_;  // shared: the Learner copies metrics
};

/// The CPU's temperature in °C from sysfs (Burn's CpuTemperature): the hottest sensor of a CPU
/// hwmon device (coretemp, k10temp, zenpower, cpu_thermal) under root/hwmon, else the hottest
/// CPU thermal zone (x86_pkg_temp, or a type naming the cpu) under root/thermal. Where none
/// exists or can be read the entry says "unavailable" and has no numeric value, so charts and
/// epoch means skip it; value() is then NaN.
class CpuTemperature {
  public:
    /// Reads under `root` (/sys/class; another directory for tests) at each update.
    explicit CpuTemperature(std::filesystem::path root = "/sys/class") : root_(std::move(root)) {}
    /// The input: nothing.
    using Input = NoInput;
    /// The current temperature, or "unavailable".
    MetricEntry update(const Input&, const MetricMetadata&) {
        const auto t = detail::cpu_temperature(root_);
        if (!t) {
            last_ = std::numeric_limits<double>::quiet_NaN();
            return MetricEntry{name(), "unavailable", {}, {}};
        }
        last_ = *t;
        return state_.update(name(), *t, 1, 1, " °C");
    }
    /// Forgets the epoch.
    void clear() { state_.reset(); }
    /// "CPU Temperature".
    std::string name() const { return "CPU Temperature"; }
    /// The last reading in °C; NaN when the last update found no sensor.
    double value() const { return last_; }

  private:
    std::filesystem::path root_;
    double last_ = std::numeric_limits<double>::quiet_NaN();
    NumericMetricState state_;
};

}  // namespace ember::train
