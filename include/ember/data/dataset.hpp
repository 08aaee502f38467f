#pragma once
// Datasets, as Burn's `burn::data::dataset`: anything with `get(index) -> std::optional<Item>`
// and `len()`. Storage lives here (InMemDataset, from a vector or a CSV file) and in
// sqlite.hpp (SqliteDataset); transformations in transform.hpp; DynDataset erases the type so
// that loaders and composed datasets hold any of them.
//
//   struct Row { std::string name; double x; std::int64_t label; EMBER_RECORD(Row, name, x, label)
//   }; auto ds = ember::data::InMemDataset<Row>::from_csv("rows.csv"); std::optional<Row> r =
//   ds.get(0);
//
// Datasets are cheap handles: copying one shares its storage (a transformation or a loader holds
// its input by value). `get` must be safe to call from several threads at once: the data loader's
// workers do.
#include <algorithm>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "../export.hpp"
#include "../record/serde.hpp"
#include "../tensor/error.hpp"

namespace ember::data {

namespace detail {
template <class T>
struct IsOptional : std::false_type {};
template <class T>
struct IsOptional<std::optional<T>> : std::true_type {};
}  // namespace detail

/// A dataset: `get(index)` gives the item at `index`, or std::nullopt past the end; `len()` the
/// number of items. Both are const, and `get` must be thread-safe.
template <class D>
concept Dataset = requires(const D& d, std::size_t i) {
    {d.get(i)};
    { d.len() } -> std::convertible_to<std::size_t>;
}
&&detail::IsOptional<decltype(std::declval<const D&>().get(std::size_t{}))>::value;

/// The item type of dataset `D` (what `get` returns, inside the optional).
template <Dataset D>
using ItemOf = typename decltype(std::declval<const D&>().get(std::size_t{}))::value_type;

/// True when `d` holds no item.
template <Dataset D>
bool is_empty(const D& d) {
    return d.len() == 0;
}

/// Any dataset of `Item`s behind one type (Burn's `Arc<dyn Dataset<I>>`): copies share the
/// dataset, so loaders, workers and composed datasets can all hold it.
template <class Item>
class DynDataset {
  public:
    /// Wraps `dataset` (moved into shared storage).
    template <Dataset D>
    requires(!std::same_as<std::remove_cvref_t<D>, DynDataset> &&
             std::same_as<ItemOf<std::remove_cvref_t<D>>, Item>) DynDataset(D&& dataset)
        : impl_(std::make_shared<Model<std::remove_cvref_t<D>>>(std::forward<D>(dataset))) {}
    /// Shares `dataset`, which must not be null.
    template <Dataset D>
    requires std::same_as<ItemOf<D>, Item> DynDataset(std::shared_ptr<const D> dataset) {
        EMBER_CHECK(dataset != nullptr, Argument, "DynDataset: the shared dataset is null");
        impl_ = std::make_shared<Shared<D>>(std::move(dataset));
    }

    /// The item at `index`, or std::nullopt when `index >= len()`.
    std::optional<Item> get(std::size_t index) const { return impl_->get(index); }
    /// The number of items.
    std::size_t len() const { return impl_->len(); }
    /// True when there is no item.
    bool is_empty() const { return len() == 0; }

  private:
    struct Concept {
        virtual ~Concept() = default;
        virtual std::optional<Item> get(std::size_t index) const = 0;
        virtual std::size_t len() const = 0;
    };
    template <class D>
    struct Model final : Concept {
        explicit Model(D dataset) : d(std::move(dataset)) {}
        std::optional<Item> get(std::size_t index) const override { return d.get(index); }
        std::size_t len() const override { return d.len(); }
        D d;
    };
    template <class D>
    struct Shared final : Concept {
        explicit Shared(std::shared_ptr<const D> dataset) : d(std::move(dataset)) {}
        std::optional<Item> get(std::size_t index) const override { return d->get(index); }
        std::size_t len() const override { return d->len(); }
        std::shared_ptr<const D> d;
    };
    std::shared_ptr<const Concept> impl_;
};

/// How `InMemDataset::from_csv` reads a file.
struct CsvOptions {
    char delimiter = ',';  ///< field separator (',' for CSV, '\t' for TSV, ...)
    char quote = '"';      ///< quotes a field holding delimiters, quotes ("" inside) or newlines
};

namespace detail {

/// One record of a CSV file: its cells and the line it starts on (1-based).
struct CsvRow {
    std::size_t line;                ///< line of the file the record starts on
    std::vector<std::string> cells;  ///< the fields, unquoted
};
/// A CSV file read whole: the header's column names and the records below it.
struct CsvTable {
    std::filesystem::path file;       ///< the file read (for error messages)
    std::vector<std::string> header;  ///< column names
    std::vector<CsvRow> rows;         ///< records, each with as many cells as the header
};

/// Reads `file`; throws FormatError "<file>:<line>: <why>" for a missing file, an empty one, an
/// unterminated quote, a repeated column name or a record whose cell count differs from the
/// header's.
EMBER_API CsvTable read_csv(const std::filesystem::path& file, const CsvOptions& options);
/// Throws FormatError "<file>:<line>:<column> (column '<name>'): <why>" (column 1-based).
[[noreturn]] EMBER_API void csv_cell_error(const CsvTable& table, const CsvRow& row,
                                           std::size_t column, std::string_view why);
/// The column index of `name`; throws FormatError naming the file and its columns when absent.
EMBER_API std::size_t csv_column(const CsvTable& table, std::string_view name);
/// The whole cell as an integer (decimal, optional sign), or nullopt.
EMBER_API std::optional<std::int64_t> parse_int(std::string_view cell);
/// The whole cell as a number (decimal, exponent, inf, nan), or nullopt.
EMBER_API std::optional<double> parse_double(std::string_view cell);
/// "true"/"false"/"1"/"0" (any case), or nullopt.
EMBER_API std::optional<bool> parse_bool(std::string_view cell);

/// The record value a cell gives a field of type `F`, or nullopt with `why` set. Strings take
/// the text as is; numbers and bools are parsed; an empty cell is null for an optional field.
template <class F>
std::optional<record::Value> csv_value(const std::string& cell, std::string& why) {
    if constexpr (IsOptional<F>::value) {
        if (cell.empty()) return record::Value();
        return csv_value<typename F::value_type>(cell, why);
    } else if constexpr (std::is_same_v<F, std::string>) {
        return record::Value(cell);
    } else if constexpr (std::is_same_v<F, bool>) {
        if (auto b = parse_bool(cell)) return record::Value(*b);
        why = "expected true, false, 1 or 0";
    } else if constexpr (std::is_integral_v<F> || std::is_enum_v<F>) {
        if (auto i = parse_int(cell)) return record::Value(*i);
        why = "expected an integer";
    } else if constexpr (std::is_floating_point_v<F>) {
        if (auto d = parse_double(cell)) return record::Value(*d);
        why = "expected a number";
    } else {
        // Another serialisable type: give it the most specific scalar the text spells.
        if (auto i = parse_int(cell)) return record::Value(*i);
        if (auto d = parse_double(cell)) return record::Value(*d);
        return record::Value(cell);
    }
    return std::nullopt;
}

}  // namespace detail

/// Items held in memory (Burn's InMemDataset): well-suited to small datasets. Copies share the
/// items.
template <class Item>
class InMemDataset {
  public:
    /// The dataset of `items`.
    explicit InMemDataset(std::vector<Item> items)
        : items_(std::make_shared<const std::vector<Item>>(std::move(items))) {}

    /// Reads a CSV file with a header into EMBER_RECORD structs: each field takes the column of
    /// its name (extra columns are ignored). Strings take the cell's text; integers, floats and
    /// bools are parsed; an empty cell is std::nullopt for an optional field. Throws FormatError
    /// naming the file, line and column of the first cell that does not fit.
    static InMemDataset from_csv(const std::filesystem::path& file,
                                 const CsvOptions& options = {}) {
        static_assert(record::detail::RecordStruct<Item>,
                      "InMemDataset::from_csv: the item must be declared with EMBER_RECORD");
        const detail::CsvTable table = detail::read_csv(file, options);
        std::vector<std::size_t> columns;
        for (std::string_view name : Item::ember_field_names)
            columns.push_back(detail::csv_column(table, name));
        std::vector<Item> items;
        items.reserve(table.rows.size());
        for (const detail::CsvRow& row : table.rows) {
            Item item{};
            std::size_t k = 0;
            ember::detail::for_each_field(item, [&](std::string_view name, auto& field) {
                using F = std::remove_cvref_t<decltype(field)>;
                const std::size_t col = columns[k++];
                std::string why;
                std::optional<record::Value> v = detail::csv_value<F>(row.cells[col], why);
                if (!v)
                    detail::csv_cell_error(table, row, col, why + ", got '" + row.cells[col] + "'");
                try {
                    field = record::from_value<F>(*v, name);
                } catch (const Error& e) {
                    detail::csv_cell_error(table, row, col, e.what());
                }
            });
            items.push_back(std::move(item));
        }
        return InMemDataset(std::move(items));
    }

    /// A copy of the item at `index`, or std::nullopt when `index >= len()`.
    std::optional<Item> get(std::size_t index) const {
        if (index >= items_->size()) return std::nullopt;
        return (*items_)[index];
    }
    /// The number of items.
    std::size_t len() const { return items_->size(); }
    /// True when there is no item.
    bool is_empty() const { return items_->empty(); }
    /// The items.
    const std::vector<Item>& items() const { return *items_; }

  private:
    std::shared_ptr<const std::vector<Item>> items_;
};

}  // namespace ember::data
