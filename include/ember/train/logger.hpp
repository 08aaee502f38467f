#pragma once
// Where the Learner writes what happens: metric loggers (Burn's MetricLogger; by default one
// file per metric and epoch, train/epoch-N/Loss.log with a line per iteration) and the
// application log (experiment.log).
#include <cstddef>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "../export.hpp"
#include "renderer.hpp"

namespace ember::train {

/// Receives every metric entry of one split.
class MetricLogger {
  public:
    virtual ~MetricLogger() = default;
    /// Epoch `epoch` begins; what an earlier, interrupted attempt at it logged is dropped.
    virtual void start_epoch(std::size_t epoch) = 0;
    /// One metric's entry for the current iteration.
    virtual void log(const MetricEntry& entry) = 0;
    /// The epoch ended or was interrupted: what was logged is persisted.
    virtual void end_epoch(std::size_t epoch) = 0;
    /// The per-iteration numeric values `name` had in `epoch`, when this logger can read them
    /// back (a resumed run rebuilds its early-stopping history from them); nullopt otherwise.
    virtual std::optional<std::vector<double>> read_numeric(const std::string& name,
                                                            std::size_t epoch) const {
        (void)name, (void)epoch;
        return std::nullopt;
    }
};

/// Writes `<dir>/epoch-N/<name>.log` (spaces and slashes of the name become '_'): one line per
/// iteration, the numeric value (shortest text that reads back exactly) or else the formatted
/// one. Each file is written atomically at the end of its epoch.
class EMBER_API FileMetricLogger : public MetricLogger {
  public:
    /// Logs under `dir` (created when needed).
    explicit FileMetricLogger(std::filesystem::path dir) : dir_(std::move(dir)) {}
    void start_epoch(std::size_t epoch) override;
    void log(const MetricEntry& entry) override;
    void end_epoch(std::size_t epoch) override;
    std::optional<std::vector<double>> read_numeric(const std::string& name,
                                                    std::size_t epoch) const override;
    /// The file a metric's values of `epoch` go to.
    std::filesystem::path file(const std::string& name, std::size_t epoch) const;

  private:
    std::filesystem::path dir_;
    std::map<std::string, std::string> lines_;  // metric name → its lines this epoch
};

/// The application log: the Learner's messages (start, resume, epoch summaries, checkpoints,
/// interruption, early stopping).
class ApplicationLogger {
  public:
    virtual ~ApplicationLogger() = default;
    /// One message.
    virtual void log(std::string_view message) = 0;
};

/// Appends "<local time> <message>" lines to a file (experiment.log), flushed at each line so
/// that the log survives a crash. Appending, not replacing: a log is never rewritten whole.
class EMBER_API FileApplicationLogger : public ApplicationLogger {
  public:
    /// Appends to `file` (its directory is created when needed).
    explicit FileApplicationLogger(std::filesystem::path file) : file_(std::move(file)) {}
    /// Appends one line; ArgumentError naming the file when it cannot be written.
    void log(std::string_view message) override;
    /// The file.
    const std::filesystem::path& file() const { return file_; }

  private:
    std::filesystem::path file_;
};

}  // namespace ember::train
