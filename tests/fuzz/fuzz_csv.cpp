// CSV files (src/data/csv.cpp and InMemDataset::from_csv): RFC 4180 records, quotes, line ends,
// the header, and each cell parsed as the item's field type. The first byte picks the delimiter
// and the quote character; the rest is the file.
#include <ember/data/dataset.hpp>

#include "fuzz.hpp"

namespace {

// An item with a field of each kind a CSV column can fill.
struct Row {
    std::int64_t id = 0;
    double x = 0;
    float y = 0;
    bool flag = false;
    std::string name;
    std::optional<std::int32_t> count;
    std::uint8_t label = 0;
    EMBER_RECORD(Row, id, x, y, flag, name, count, label)
};

}  // namespace

EMBER_FUZZ_TARGET(csv) {
    using namespace ember;
    fuzz::Reader in(input);
    const std::uint8_t mode = in.byte();
    constexpr char delimiters[] = {',', '\t', ';', '"', '\n'};  // the last two are refused
    data::CsvOptions options;
    options.delimiter = delimiters[(mode & 7) % 5];
    options.quote = (mode & 8) ? '\'' : '"';
    const auto file = fuzz::scratch_dir() / "fuzz.csv";
    fuzz::write_file(file, in.rest());
    fuzz::refused_or_fine([&] {
        const auto ds = data::InMemDataset<Row>::from_csv(file, options);
        for (std::size_t i = 0; i < ds.len(); ++i) (void)ds.get(i);
    });
}
