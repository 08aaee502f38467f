#pragma once
// SqliteDataset: items in a SQLite database file, one MessagePack blob per item (Burn's
// SqliteDataset), for datasets larger than memory or built once and read many times.
//
// Layout (format version 1):
//   ember_dataset(key TEXT PRIMARY KEY, value TEXT)   -- format = ember-sqlite-dataset,
//                                                        version = 1, encoding = NamedMpk
//   items(split TEXT, row_id INTEGER, item BLOB, PRIMARY KEY (split, row_id))
// Each split ("train", "test", ...) numbers its rows 0..n-1; `item` holds the named-MessagePack
// record of the item (record::to_value), the format NamedMpkFileRecorder writes.
//
//   ember::data::SqliteDatasetWriter<Row> w("rows.db");
//   w.write("train", row);  ...;  w.commit();           // the file appears whole, or not at all
//   ember::data::SqliteDataset<Row> train("rows.db", "train");
#include <cstddef>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "../export.hpp"
#include "../record/recorder.hpp"
#include "../record/serde.hpp"

namespace ember::data {

namespace detail {

/// Reads the blobs of one split; `blob` is thread-safe (a pool of read-only connections).
class EMBER_API SqliteReader {
  public:
    /// Opens `file` read-only; throws FormatError when it is missing or not an ember dataset, and
    /// ArgumentError when it has no split `split` (naming those it has).
    SqliteReader(std::filesystem::path file, std::string split);
    ~SqliteReader();
    SqliteReader(const SqliteReader&) = delete;
    SqliteReader& operator=(const SqliteReader&) = delete;
    /// The number of rows of the split.
    std::size_t len() const;
    /// The blob of row `index` (< len()); throws FormatError when the row is missing.
    std::vector<std::byte> blob(std::size_t index) const;
    /// The file.
    const std::filesystem::path& file() const;
    /// The split.
    const std::string& split() const;
    /// The splits `file` holds, sorted; throws FormatError as the constructor does.
    static std::vector<std::string> splits(const std::filesystem::path& file);

  private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

/// Builds a dataset file under a temporary name, renamed over `file` on commit.
class EMBER_API SqliteWriter {
  public:
    /// Starts a new database; throws ArgumentError when `file` exists and `overwrite` is false,
    /// or when the temporary file cannot be created.
    SqliteWriter(std::filesystem::path file, bool overwrite);
    /// Removes the temporary file unless committed.
    ~SqliteWriter();
    SqliteWriter(const SqliteWriter&) = delete;
    SqliteWriter& operator=(const SqliteWriter&) = delete;
    /// Appends `blob` to `split`; returns its row index.
    std::size_t append(std::string_view split, std::span<const std::byte> blob);
    /// The rows written to `split` so far.
    std::size_t len(std::string_view split) const;
    /// Commits, flushes to disk and renames the file into place; further writes are errors.
    void commit();

  private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace detail

/// The items of one split of a dataset file written by SqliteDatasetWriter. Copies share the
/// open database; `get` is thread-safe.
template <class Item>
class SqliteDataset {
  public:
    /// Opens split `split` of `file`; throws FormatError when the file is missing or not an ember
    /// dataset, ArgumentError when it has no such split.
    SqliteDataset(const std::filesystem::path& file, const std::string& split)
        : reader_(std::make_shared<const detail::SqliteReader>(file, split)) {}

    /// The item at `index`, or std::nullopt when `index >= len()`. Throws FormatError naming the
    /// file, split and row when the stored blob is not a record of `Item`.
    std::optional<Item> get(std::size_t index) const {
        if (index >= reader_->len()) return std::nullopt;
        const std::vector<std::byte> bytes = reader_->blob(index);
        const std::string where = reader_->file().string() + " [" + reader_->split() + " row " +
                                  std::to_string(index) + "]";
        const record::Value v =
            record::detail::decode(bytes, record::detail::Format::NamedMpk, where);
        return record::from_value<Item>(v, where);
    }
    /// The number of items of the split.
    std::size_t len() const { return reader_->len(); }
    /// True when the split holds no item.
    bool is_empty() const { return len() == 0; }
    /// The splits of `file`, sorted.
    static std::vector<std::string> splits(const std::filesystem::path& file) {
        return detail::SqliteReader::splits(file);
    }

  private:
    std::shared_ptr<const detail::SqliteReader> reader_;
};

/// Writes a dataset file for SqliteDataset<Item>. The database is built under a temporary name
/// and renamed over `file` by `commit()`; a writer destroyed without committing leaves nothing
/// behind. Tensors inside items are stored at the precision `S` (FullPrecisionSettings: f32/i32).
template <class Item, record::PrecisionSettingsType S = record::FullPrecisionSettings>
class SqliteDatasetWriter {
  public:
    /// Starts writing `file`; throws ArgumentError when it exists and `overwrite` is false.
    explicit SqliteDatasetWriter(const std::filesystem::path& file, bool overwrite = false)
        : writer_(file, overwrite) {}

    /// Appends `item` to `split`; returns its index in the split.
    std::size_t write(std::string_view split, const Item& item) {
        const std::vector<std::byte> bytes = record::detail::encode(
            record::to_value(item), record::detail::Format::NamedMpk, S::value);
        return writer_.append(split, bytes);
    }
    /// Appends every item of `items` to `split`.
    template <class Range>
    void write_all(std::string_view split, const Range& items) {
        for (const auto& item : items) write(split, item);
    }
    /// The number of items written to `split` so far.
    std::size_t len(std::string_view split) const { return writer_.len(split); }
    /// Finishes the file and moves it into place.
    void commit() { writer_.commit(); }

  private:
    detail::SqliteWriter writer_;
};

}  // namespace ember::data
