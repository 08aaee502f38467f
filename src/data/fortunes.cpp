// FortunesDataset: the fortune-file parser, the deterministic split, and CharTokenizer.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <map>
#include <set>

#include "ember/data/text.hpp"
#include "ember/record/untrusted.hpp"
#include "ember/tensor/error.hpp"

namespace ember::data {
namespace fs = std::filesystem;

namespace {

constexpr const char* kInstallHint =
    "install the fortunes with `apt-get install fortunes` (Debian), or set EMBER_DATA_DIR to a "
    "directory holding fortunes/<category files>";

// splitmix64: the split must not depend on the standard library's distributions or shuffle,
// which differ between implementations.
struct SplitMix64 {
    std::uint64_t state;
    std::uint64_t next() {
        std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
    }
};

std::string read_text(const fs::path& path) {
    // A regular file only (a FIFO found among the fortunes is refused, never waited on).
    const auto bytes = record::detail::RegularFile(path, "a fortune file").read_all();
    return std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

// Splits a fortune file at lines holding only `%`, dropping empty entries.
void parse_fortunes(const std::string& text, const std::string& category, std::size_t label,
                    std::vector<FortuneItem>& out) {
    std::string entry;
    auto flush = [&] {
        const auto end = entry.find_last_not_of(" \t\r\n");
        if (end != std::string::npos) {
            entry.resize(end + 1);
            out.push_back({std::move(entry), category, label});
        }
        entry.clear();
    };
    std::size_t pos = 0;
    while (pos < text.size()) {
        std::size_t eol = text.find('\n', pos);
        const bool last = eol == std::string::npos;
        if (last) eol = text.size();
        std::string_view line(text.data() + pos, eol - pos);
        if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
        if (line == "%")
            flush();
        else
            entry.append(text, pos, eol - pos).push_back('\n');
        pos = last ? eol : eol + 1;
    }
    flush();
}

}  // namespace

std::vector<fs::path> FortunesDataset::default_dirs() {
    std::vector<fs::path> dirs;
    if (const char* env = std::getenv("EMBER_DATA_DIR"); env != nullptr && *env != '\0')
        dirs.push_back(fs::path(env) / "fortunes");
    dirs.emplace_back(debian_dir());
    return dirs;
}

FortunesDataset::FortunesDataset() {
    std::string looked;
    std::error_code ec;
    for (const fs::path& dir : default_dirs()) {
        if (fs::is_directory(dir, ec)) {
            load(dir);
            return;
        }
        looked += (looked.empty() ? "" : ", ") + dir.string();
    }
    EMBER_FAIL(Format, "FortunesDataset: no fortune directory found (looked in ", looked, "); ",
               kInstallHint);
}

FortunesDataset::FortunesDataset(const fs::path& dir) {
    std::error_code ec;
    EMBER_CHECK(fs::is_directory(dir, ec), Format, "FortunesDataset: ", dir.string(),
                " is not a directory; ", kInstallHint);
    load(dir);
}

void FortunesDataset::load(const fs::path& dir) {
    // Category files, sorted by name. A link to a file of the directory (fortunes.u8 ->
    // fortunes in Debian, or any other alias) is skipped so no fortune is counted twice, but a
    // directory made only of links to files elsewhere still works.
    std::map<std::string, fs::path> files, links;
    for (const fs::directory_entry& e : fs::directory_iterator(dir)) {
        const std::string name = e.path().filename().string();
        const std::string ext = e.path().extension().string();
        if (!e.is_regular_file() || name.starts_with('.') || ext == ".dat" || ext == ".u8")
            continue;
        (e.is_symlink() ? links : files).emplace(name, e.path());
    }
    std::set<fs::path> seen;
    for (const auto& [name, path] : files) seen.insert(fs::canonical(path));
    for (const auto& [name, path] : links)
        if (seen.insert(fs::canonical(path)).second) files.emplace(name, path);

    std::vector<std::string> categories;
    std::vector<FortuneItem> items;
    for (const auto& [name, path] : files) {
        const std::size_t before = items.size();
        parse_fortunes(read_text(path), name, categories.size(), items);
        if (items.size() > before) categories.push_back(name);  // empty files are no category
    }
    EMBER_CHECK(!items.empty(), Format, "FortunesDataset: no fortunes in ", dir.string(),
                " (expected one file per category, entries separated by lines holding only %); ",
                kInstallHint);
    items_ = std::make_shared<const std::vector<FortuneItem>>(std::move(items));
    categories_ = std::make_shared<const std::vector<std::string>>(std::move(categories));
}

std::optional<FortuneItem> FortunesDataset::get(std::size_t index) const {
    if (index >= len()) return std::nullopt;
    return (*items_)[index];
}

FortunesDataset FortunesDataset::filter_categories(const std::vector<std::string>& names) const {
    std::vector<std::string> keep(names);
    std::sort(keep.begin(), keep.end());
    keep.erase(std::unique(keep.begin(), keep.end()), keep.end());
    for (const std::string& n : keep)
        EMBER_CHECK(std::binary_search(categories_->begin(), categories_->end(), n), Argument,
                    "FortunesDataset::filter_categories: no category \"", n, "\" among the ",
                    categories_->size(), " categories");
    std::vector<FortuneItem> items;
    for (const FortuneItem& it : *items_) {
        const auto pos = std::lower_bound(keep.begin(), keep.end(), it.category);
        if (pos != keep.end() && *pos == it.category)
            items.push_back({it.text, it.category, static_cast<std::size_t>(pos - keep.begin())});
    }
    return {std::make_shared<const std::vector<FortuneItem>>(std::move(items)),
            std::make_shared<const std::vector<std::string>>(std::move(keep))};
}

FortunesDataset FortunesDataset::filter(const std::function<bool(const FortuneItem&)>& keep) const {
    std::vector<FortuneItem> items;
    std::copy_if(items_->begin(), items_->end(), std::back_inserter(items), keep);
    return {std::make_shared<const std::vector<FortuneItem>>(std::move(items)), categories_};
}

std::pair<FortunesDataset, FortunesDataset> FortunesDataset::split(double train_fraction,
                                                                   std::uint64_t seed) const {
    EMBER_CHECK(train_fraction >= 0.0 && train_fraction <= 1.0, Argument,
                "FortunesDataset::split: train_fraction must be in [0, 1], got ", train_fraction);
    std::vector<std::vector<std::size_t>> by_label(categories_->size());
    for (std::size_t i = 0; i < items_->size(); ++i) by_label[(*items_)[i].label].push_back(i);
    std::vector<bool> in_train(items_->size(), false);
    SplitMix64 rng{seed};
    for (std::vector<std::size_t>& idx : by_label) {
        for (std::size_t i = idx.size(); i > 1; --i)  // Fisher-Yates
            std::swap(idx[i - 1], idx[rng.next() % i]);
        const auto n_train = static_cast<std::size_t>(
            std::llround(train_fraction * static_cast<double>(idx.size())));
        for (std::size_t k = 0; k < n_train; ++k) in_train[idx[k]] = true;
    }
    std::vector<FortuneItem> train, test;
    for (std::size_t i = 0; i < items_->size(); ++i)
        (in_train[i] ? train : test).push_back((*items_)[i]);
    return {FortunesDataset(std::make_shared<const std::vector<FortuneItem>>(std::move(train)),
                            categories_),
            FortunesDataset(std::make_shared<const std::vector<FortuneItem>>(std::move(test)),
                            categories_)};
}

std::string FortunesDataset::corpus(std::string_view separator) const {
    std::string out;
    for (std::size_t i = 0; i < items_->size(); ++i) {
        if (i > 0) out.append(separator);
        out.append((*items_)[i].text);
    }
    return out;
}

CharTokenizer::CharTokenizer(std::string_view corpus) {
    bool present[256] = {};
    for (char c : corpus) present[static_cast<unsigned char>(c)] = true;
    std::fill(std::begin(token_of_), std::end(token_of_), std::int16_t{-1});
    for (int b = 0; b < 256; ++b) {
        if (!present[b]) continue;
        token_of_[b] = static_cast<std::int16_t>(vocab_.size());
        vocab_.push_back(static_cast<char>(b));
    }
    EMBER_CHECK(!vocab_.empty(), Argument, "CharTokenizer: the corpus is empty");
}

std::vector<std::size_t> CharTokenizer::encode(std::string_view text) const {
    std::vector<std::size_t> out;
    out.reserve(text.size());
    for (std::size_t i = 0; i < text.size(); ++i) {
        const auto b = static_cast<unsigned char>(text[i]);
        EMBER_CHECK(token_of_[b] >= 0, Argument, "CharTokenizer::encode: byte ", int(b),
                    " at position ", i, " is not in the vocabulary of ", vocab_.size(), " bytes");
        out.push_back(static_cast<std::size_t>(token_of_[b]));
    }
    return out;
}

std::string CharTokenizer::decode(std::span<const std::size_t> tokens) const {
    std::string out;
    out.reserve(tokens.size());
    for (std::size_t i = 0; i < tokens.size(); ++i) {
        EMBER_CHECK(tokens[i] < vocab_.size(), Index, "CharTokenizer::decode: token ", tokens[i],
                    " at position ", i, " is out of range for a vocabulary of ", vocab_.size());
        out.push_back(vocab_[tokens[i]]);
    }
    return out;
}

}  // namespace ember::data
