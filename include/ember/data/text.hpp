#pragma once
// Built-in text data: FortunesDataset over the fortune-cookie files of Debian's `fortunes`
// package (one file per category, entries separated by lines holding only `%`), for text
// classification (category labels) and character-level generation (corpus() and CharTokenizer).
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "../export.hpp"

namespace ember::data {

/// One fortune: its text and its category.
struct FortuneItem {
    /// The text, without the trailing newline.
    std::string text;
    /// The category: the name of the file it came from (e.g. "computers").
    std::string category;
    /// The index of `category` in the dataset's categories().
    std::size_t label = 0;
};

/// The fortunes of a directory of fortune files, in category order then file order.
///
/// Where the files are looked for when no directory is given: `$EMBER_DATA_DIR/fortunes` when
/// EMBER_DATA_DIR is set, then Debian's `/usr/share/games/fortunes`. Every regular file there is a
/// category, except hidden files, the `.dat` indexes of strfile, `.u8` links and subdirectories
/// (such as `off/`). A missing directory throws FormatError naming the paths looked at and how to
/// install the data.
class EMBER_API FortunesDataset {
  public:
    /// All fortunes of the default locations.
    FortunesDataset();
    /// All fortunes of the files in `dir`.
    explicit FortunesDataset(const std::filesystem::path& dir);

    /// The directories searched when none is given, in order (EMBER_DATA_DIR read now).
    static std::vector<std::filesystem::path> default_dirs();
    /// Debian's fortunes directory.
    static const char* debian_dir() { return "/usr/share/games/fortunes"; }

    /// Item `index`, or nullopt past the end.
    std::optional<FortuneItem> get(std::size_t index) const;
    /// Number of fortunes.
    std::size_t len() const { return items_->size(); }
    /// Whether there are no fortunes.
    bool is_empty() const { return items_->empty(); }

    /// The category names, sorted; a fortune's label indexes this list.
    const std::vector<std::string>& categories() const { return *categories_; }
    /// Number of categories.
    std::size_t num_categories() const { return categories_->size(); }

    /// The fortunes of the given categories only, relabelled 0.. in sorted category order;
    /// throws ArgumentError naming a category that is not in categories().
    FortunesDataset filter_categories(const std::vector<std::string>& names) const;
    /// The fortunes for which `keep` is true, labels and categories unchanged (e.g. a maximum
    /// length for a classifier with a fixed context).
    FortunesDataset filter(const std::function<bool(const FortuneItem&)>& keep) const;

    /// A deterministic split into (train, test): within each category, `train_fraction` of the
    /// fortunes (rounded to nearest) chosen by a shuffle seeded with `seed` go to train, the rest
    /// to test; both keep the original order and all categories. The same seed gives the same
    /// split on every platform. Throws ArgumentError unless 0 <= train_fraction <= 1.
    std::pair<FortunesDataset, FortunesDataset> split(double train_fraction,
                                                      std::uint64_t seed = 0) const;

    /// The texts of all fortunes joined by `separator`, for character-level language models.
    std::string corpus(std::string_view separator = "\n\n") const;

  private:
    FortunesDataset(std::shared_ptr<const std::vector<FortuneItem>> items,
                    std::shared_ptr<const std::vector<std::string>> categories)
        : items_(std::move(items)), categories_(std::move(categories)) {}
    void load(const std::filesystem::path& dir);

    std::shared_ptr<const std::vector<FortuneItem>> items_;
    std::shared_ptr<const std::vector<std::string>> categories_;
};

/// A character-level tokenizer: one token per distinct byte of a corpus, in byte order (UTF-8
/// text is handled byte by byte, so decode() of arbitrary tokens may split a character).
class EMBER_API CharTokenizer {
  public:
    /// The vocabulary of the bytes present in `corpus`; throws ArgumentError when it is empty.
    explicit CharTokenizer(std::string_view corpus);

    /// The vocabulary: token i stands for byte vocab()[i].
    const std::string& vocab() const { return vocab_; }
    /// Number of tokens.
    std::size_t vocab_size() const { return vocab_.size(); }
    /// The tokens of `text`; throws ArgumentError naming the first byte not in the vocabulary.
    std::vector<std::size_t> encode(std::string_view text) const;
    /// The text of `tokens`; throws IndexError for a token >= vocab_size().
    std::string decode(std::span<const std::size_t> tokens) const;

  private:
    std::string vocab_;
    std::int16_t token_of_[256];  // -1 for bytes not in the vocabulary
};

}  // namespace ember::data
