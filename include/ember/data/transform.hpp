#pragma once
// Dataset transformations (Burn's `burn::data::dataset::transform`): views over other datasets
// that reorder, sample, slice, map, concatenate or window their items without copying them.
// Each holds its input by value (datasets are cheap handles) and is itself a Dataset. Random ones
// take a seed and draw from data::detail::Rng, so a seed gives the same order everywhere.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

#include "dataset.hpp"
#include "detail/random.hpp"

namespace ember::data {

namespace detail {
/// A dataset seen through a list of indices into it: item i is the input's item indices[i].
/// What SamplerDataset and ShuffledDataset share.
template <Dataset D>
class IndexedDataset {
  public:
    /// Item `indices()[index]` of the input, or std::nullopt when `index >= len()`.
    std::optional<ItemOf<D>> get(std::size_t index) const {
        if (index >= indices_.size()) return std::nullopt;
        return dataset_.get(indices_[index]);
    }
    /// The number of items (the number of indices).
    std::size_t len() const { return indices_.size(); }
    /// True when there is no item.
    bool is_empty() const { return indices_.empty(); }
    /// Item `index` is the input's item `indices()[index]`.
    const std::vector<std::size_t>& indices() const { return indices_; }

  protected:
    explicit IndexedDataset(D dataset) : dataset_(std::move(dataset)) {}
    D dataset_;
    std::vector<std::size_t> indices_;
};
}  // namespace detail

/// A dataset of `size` items drawn at random from another (Burn's SamplerDataset): a way to
/// treat a dataset as a distribution, e.g. a fixed number of samples per epoch. With
/// replacement, each item is drawn independently and uniformly. Without replacement, the items
/// come in a random permutation; past the first `len()` items a fresh permutation starts, so
/// every item appears floor(size/len) or one more times. The draws are fixed at construction.
template <Dataset D>
class SamplerDataset : public detail::IndexedDataset<D> {
  public:
    /// `size` items sampled with replacement from `dataset` (Burn's `SamplerDataset::new`).
    SamplerDataset(D dataset, std::size_t size, std::uint64_t seed)
        : SamplerDataset(std::move(dataset), size, seed, true) {}
    /// `size` items sampled with replacement.
    static SamplerDataset with_replacement(D dataset, std::size_t size, std::uint64_t seed) {
        return SamplerDataset(std::move(dataset), size, seed, true);
    }
    /// `size` items sampled without replacement (permutations end to end).
    static SamplerDataset without_replacement(D dataset, std::size_t size, std::uint64_t seed) {
        return SamplerDataset(std::move(dataset), size, seed, false);
    }

  private:
    SamplerDataset(D dataset, std::size_t size, std::uint64_t seed, bool replacement)
        : detail::IndexedDataset<D>(std::move(dataset)) {
        auto& picks = this->indices_;
        const std::size_t n = this->dataset_.len();
        EMBER_CHECK(n > 0 || size == 0, Argument, "SamplerDataset: cannot draw ", size,
                    " samples from an empty dataset");
        picks.reserve(size);
        detail::Rng rng(seed);
        if (replacement) {
            for (std::size_t i = 0; i < size; ++i)
                picks.push_back(static_cast<std::size_t>(rng.uniform(n)));
        } else {
            while (picks.size() < size) {
                const auto perm = detail::permutation(n, rng.next());
                const std::size_t take = std::min(n, size - picks.size());
                picks.insert(picks.end(), perm.begin(), perm.begin() + take);
            }
        }
    }
};

/// The items of a dataset in a seeded random order (Burn's ShuffledDataset).
template <Dataset D>
class ShuffledDataset : public detail::IndexedDataset<D> {
  public:
    /// `dataset` permuted by a permutation drawn from `seed`.
    ShuffledDataset(D dataset, std::uint64_t seed)
        : detail::IndexedDataset<D>(std::move(dataset)) {
        this->indices_ = detail::permutation(this->dataset_.len(), seed);
    }

};

/// Items [start, end) of a dataset (Burn's PartialDataset): train/validation splits.
template <Dataset D>
class PartialDataset {
  public:
    /// Items `start` to `end - 1` of `dataset`; throws IndexError unless
    /// start <= end <= dataset.len().
    PartialDataset(D dataset, std::size_t start, std::size_t end)
        : dataset_(std::move(dataset)), start_(start), end_(end) {
        EMBER_CHECK(start <= end && end <= dataset_.len(), Index, "PartialDataset: range [", start,
                    ", ", end, ") is not within the dataset's ", dataset_.len(), " items");
    }

    /// Item `start + index` of the input, or std::nullopt when `index >= len()`.
    std::optional<ItemOf<D>> get(std::size_t index) const {
        if (index >= end_ - start_) return std::nullopt;
        return dataset_.get(start_ + index);
    }
    /// end - start.
    std::size_t len() const { return end_ - start_; }
    /// True when the range is empty.
    bool is_empty() const { return end_ == start_; }

  private:
    D dataset_;
    std::size_t start_, end_;
};

/// A dataset whose items are `mapper(item)` of another's, computed on each `get` (Burn's
/// MapperDataset). The mapper is called from the loader's worker threads: it must be
/// thread-safe when called through a const reference.
template <Dataset D, class F>
requires std::invocable<const F&, ItemOf<D> &&> class MapperDataset {
  public:
    /// The item type: what the mapper returns.
    using Item = std::remove_cvref_t<std::invoke_result_t<const F&, ItemOf<D>&&>>;

    /// `dataset` seen through `mapper`.
    MapperDataset(D dataset, F mapper) : dataset_(std::move(dataset)), mapper_(std::move(mapper)) {}

    /// `mapper(item)` for the input's item at `index`, or std::nullopt when `index >= len()`.
    std::optional<Item> get(std::size_t index) const {
        std::optional<ItemOf<D>> item = dataset_.get(index);
        if (!item) return std::nullopt;
        return std::optional<Item>(std::invoke(mapper_, std::move(*item)));
    }
    /// The input's length.
    std::size_t len() const { return dataset_.len(); }
    /// True when the input is empty.
    bool is_empty() const { return len() == 0; }

  private:
    D dataset_;
    F mapper_;
};

/// Several datasets end to end, without copying (Burn's ComposedDataset). Datasets of
/// different types are composed through DynDataset<Item>.
template <Dataset D>
class ComposedDataset {
  public:
    /// The concatenation of `datasets`, in order. Their lengths are read once, here.
    explicit ComposedDataset(std::vector<D> datasets) : datasets_(std::move(datasets)) {
        std::size_t total = 0;
        for (const D& d : datasets_) ends_.push_back(total += d.len());
    }

    /// The item at `index` of the concatenation, or std::nullopt when `index >= len()`.
    std::optional<ItemOf<D>> get(std::size_t index) const {
        // The first dataset whose end lies beyond `index` holds it.
        const auto it = std::upper_bound(ends_.begin(), ends_.end(), index);
        if (it == ends_.end()) return std::nullopt;
        const auto k = static_cast<std::size_t>(it - ends_.begin());
        const std::size_t start = k == 0 ? 0 : ends_[k - 1];
        return datasets_[k].get(index - start);
    }
    /// The sum of the lengths.
    std::size_t len() const { return ends_.empty() ? 0 : ends_.back(); }
    /// True when every dataset is empty.
    bool is_empty() const { return len() == 0; }

  private:
    std::vector<D> datasets_;
    std::vector<std::size_t> ends_;  // cumulative lengths
};

/// Overlapping windows of `size` consecutive items (Burn's WindowsDataset): window `i` is items
/// i .. i+size-1, so there are len - size + 1 of them (none when the input is shorter).
template <Dataset D>
class WindowsDataset {
  public:
    /// The windows of `size` items of `dataset`; throws ArgumentError when `size` is 0.
    WindowsDataset(D dataset, std::size_t size) : dataset_(std::move(dataset)), size_(size) {
        EMBER_CHECK(size > 0, Argument, "WindowsDataset: the window size must be positive");
    }

    /// The window starting at item `index`, or std::nullopt when `index >= len()`.
    std::optional<std::vector<ItemOf<D>>> get(std::size_t index) const {
        if (index >= len()) return std::nullopt;
        std::vector<ItemOf<D>> window;
        window.reserve(size_);
        for (std::size_t i = index; i < index + size_; ++i) {
            std::optional<ItemOf<D>> item = dataset_.get(i);
            if (!item) return std::nullopt;  // the input shrank: no partial window
            window.push_back(std::move(*item));
        }
        return window;
    }
    /// The number of windows.
    std::size_t len() const {
        const std::size_t n = dataset_.len();
        return n >= size_ ? n - size_ + 1 : 0;
    }
    /// True when the input is shorter than one window.
    bool is_empty() const { return len() == 0; }
    /// The window size.
    std::size_t size() const { return size_; }

  private:
    D dataset_;
    std::size_t size_;
};

}  // namespace ember::data
