// CSV reading for InMemDataset::from_csv: RFC 4180 records (quoted fields may hold delimiters,
// doubled quotes and newlines), CRLF or LF line ends, a header naming the columns.
#include <cctype>
#include <charconv>
#include <fstream>
#include <iterator>

#include "ember/data/dataset.hpp"
#include "ember/record/untrusted.hpp"

namespace ember::data::detail {

namespace {

std::string shown(const std::filesystem::path& file) {
    return record::printable(file.string(), 4096);
}

/// Splits the text into records, tracking the line each starts on.
class CsvParser {
  public:
    CsvParser(const std::filesystem::path& file, std::string text, const CsvOptions& options)
        : file_(file), text_(std::move(text)), opt_(options) {}

    /// The next record, or nullopt at the end of the text. Blank lines are skipped.
    std::optional<CsvRow> next() {
        while (pos_ < text_.size()) {
            CsvRow row{line_, {}};
            parse_record(row);
            if (row.cells.size() == 1 && row.cells[0].empty() && !quoted_) continue;  // blank
            return row;
        }
        return std::nullopt;
    }

  private:
    // Reads one record up to its line end (or the end of the text) into `row`.
    void parse_record(CsvRow& row) {
        std::string cell;
        quoted_ = false;
        bool in_quotes = false, after_quote = false;
        std::size_t quote_line = line_;
        while (pos_ < text_.size()) {
            const char c = text_[pos_++];
            if (in_quotes) {
                if (c == opt_.quote) {
                    if (pos_ < text_.size() && text_[pos_] == opt_.quote) {
                        cell += c;  // a doubled quote stands for one
                        ++pos_;
                    } else {
                        in_quotes = false;
                        after_quote = true;
                    }
                } else {
                    if (c == '\n') ++line_;
                    cell += c;
                }
                continue;
            }
            if (c == opt_.delimiter) {
                row.cells.push_back(std::move(cell));
                cell.clear();
                after_quote = false;
            } else if (c == '\n' || c == '\r') {
                if (c == '\r' && pos_ < text_.size() && text_[pos_] == '\n') ++pos_;
                ++line_;
                row.cells.push_back(std::move(cell));
                return;
            } else if (c == opt_.quote && cell.empty() && !after_quote) {
                in_quotes = quoted_ = true;
                quote_line = line_;
            } else {
                EMBER_CHECK(!after_quote, Format, shown(file_), ":", line_, ":",
                            row.cells.size() + 1, ": text after the closing quote of a field");
                cell += c;
            }
        }
        EMBER_CHECK(!in_quotes, Format, shown(file_), ":", quote_line, ":", row.cells.size() + 1,
                    ": the quote opened here is never closed");
        row.cells.push_back(std::move(cell));
    }

    const std::filesystem::path& file_;
    std::string text_;
    CsvOptions opt_;
    std::size_t pos_ = 0;
    std::size_t line_ = 1;
    bool quoted_ = false;  // the last record had a quoted field (so "" is a cell, not a blank)
};

}  // namespace

CsvTable read_csv(const std::filesystem::path& file, const CsvOptions& options) {
    EMBER_CHECK(options.delimiter != options.quote && options.delimiter != '\n' &&
                    options.delimiter != '\r',
                Argument, "InMemDataset::from_csv: delimiter '", options.delimiter,
                "' cannot be the quote character or a line end");
    // A regular file only (a FIFO or /dev/zero is refused before reading), at most the read
    // limit in size.
    std::string text;
    {
        const auto bytes = record::detail::RegularFile(file, "the CSV file").read_all();
        text.assign(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    }
    if (text.size() >= 3 && text.compare(0, 3, "\xEF\xBB\xBF") == 0) text.erase(0, 3);  // BOM

    CsvParser parser(file, std::move(text), options);
    CsvTable table{file, {}, {}};
    std::optional<CsvRow> header = parser.next();
    EMBER_CHECK(header.has_value(), Format, shown(file),
                ": empty CSV file (a header line naming the columns is required)");
    table.header = std::move(header->cells);
    for (std::size_t i = 0; i < table.header.size(); ++i) {
        for (std::size_t j = 0; j < i; ++j)
            EMBER_CHECK(table.header[i] != table.header[j], Format, shown(file), ":", header->line,
                        ":", i + 1, ": column '", record::printable(table.header[i]),
                        "' also names column ", j + 1);
    }
    while (std::optional<CsvRow> row = parser.next()) {
        EMBER_CHECK(row->cells.size() == table.header.size(), Format, shown(file), ":", row->line,
                    ": ", row->cells.size(), " fields, but the header has ", table.header.size());
        table.rows.push_back(std::move(*row));
    }
    return table;
}

void csv_cell_error(const CsvTable& table, const CsvRow& row, std::size_t column,
                    std::string_view why) {
    EMBER_FAIL(Format, shown(table.file), ":", row.line, ":", column + 1, " (column '",
               record::printable(table.header[column]), "'): ", record::printable(why));
}

std::size_t csv_column(const CsvTable& table, std::string_view name) {
    for (std::size_t i = 0; i < table.header.size(); ++i)
        if (table.header[i] == name) return i;
    std::string columns;
    for (const auto& h : table.header)
        columns += (columns.empty() ? "'" : ", '") + record::printable(h) + "'";
    EMBER_FAIL(Format, shown(table.file), ": no column '", name, "' for the item's field of that ",
               "name (the header has ", columns, ")");
}

std::optional<std::int64_t> parse_int(std::string_view cell) {
    if (cell.size() > 1 && cell[0] == '+' && cell[1] != '-') cell.remove_prefix(1);
    std::int64_t v = 0;
    const auto [end, ec] = std::from_chars(cell.data(), cell.data() + cell.size(), v);
    if (cell.empty() || ec != std::errc() || end != cell.data() + cell.size()) return std::nullopt;
    return v;
}

std::optional<double> parse_double(std::string_view cell) {
    if (cell.size() > 1 && cell[0] == '+' && cell[1] != '-') cell.remove_prefix(1);
    double v = 0;
    const auto [end, ec] = std::from_chars(cell.data(), cell.data() + cell.size(), v);
    if (cell.empty() || ec != std::errc() || end != cell.data() + cell.size()) return std::nullopt;
    return v;
}

std::optional<bool> parse_bool(std::string_view cell) {
    std::string s(cell);
    for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (s == "true" || s == "1") return true;
    if (s == "false" || s == "0") return false;
    return std::nullopt;
}

}  // namespace ember::data::detail
