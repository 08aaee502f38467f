#pragma once
// Batchers and the data loader (Burn's `burn::data::dataloader`): a loader draws the items of a
// dataset in batches, turns each list of items into a batch with a Batcher, and hands the
// batches out in order, optionally shuffled and prepared ahead by worker threads.
//
//   struct MnistBatcher {
//       MnistBatch batch(std::vector<MnistItem> items, const ember::Device<B>& device) const;
//   };
//   auto loader = ember::data::DataLoaderBuilder(MnistBatcher{})
//                     .batch_size(64).shuffle(42).num_workers(4).build(train_dataset);
//   for (const MnistBatch& batch : loader.iter()) { ... }   // one epoch; iter() again: the next
//
// Determinism: batch b of an epoch holds the items at positions [b * batch_size, ...) of that
// epoch's order — the identity, or a permutation drawn from the seed and the epoch number — so
// a seed gives the same batches, in the same order, whatever the number of workers. Workers
// put finished batches in a reorder buffer; the caller takes them in batch order.
#include <algorithm>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <iterator>
#include <memory>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

#include "../export.hpp"
#include "dataset.hpp"
#include "detail/random.hpp"

namespace ember::data {

/// A batcher turns a list of items into a batch on a device (Burn's Batcher). `batch` is called
/// from the loader's worker threads at once: it must be thread-safe through a const reference.
template <class Bt, class Item, class Device>
concept Batcher = requires(const Bt& b, std::vector<Item> items, const Device& device) {
    {b.batch(std::move(items), device)};
};

namespace detail {

/// What a batcher's (non-overloaded, non-template) `batch` member takes and returns.
template <class F>
struct BatchFn;
template <class C, class I, class Dev, class R>
struct BatchFn<R (C::*)(std::vector<I>, Dev) const> {
    using Item = I;
    using Device = std::remove_cvref_t<Dev>;
    using Batch = R;
};
template <class C, class I, class Dev, class R>
struct BatchFn<R (C::*)(std::vector<I>, Dev) const noexcept>
    : BatchFn<R (C::*)(std::vector<I>, Dev) const> {};

/// Hands out the batches of one epoch in order, computing them on the calling thread
/// (no workers) or on worker threads that run ahead by up to `prefetch` batches.
class EMBER_API BatchPool {
  public:
    /// Computes batch `b` (type-erased, so that the threading is compiled once).
    using Job = std::function<std::shared_ptr<void>(std::size_t b)>;
    /// Starts `num_workers` threads (none: batches are computed in next()).
    BatchPool(std::size_t num_batches, std::size_t num_workers, std::size_t prefetch, Job job);
    /// Stops the workers (they finish the batch in hand) and joins them.
    ~BatchPool();
    BatchPool(const BatchPool&) = delete;
    BatchPool& operator=(const BatchPool&) = delete;
    /// The next batch, or nullptr after the last. Rethrows the exception a job threw for it;
    /// after that the epoch is over.
    std::shared_ptr<void> next();
    /// The number of batches handed out so far.
    std::size_t taken() const { return next_; }

  private:
    struct State;
    void work();
    void stop_and_join();
    std::size_t num_batches_;
    std::size_t next_ = 0;
    bool failed_ = false;
    Job job_;
    std::unique_ptr<State> state_;
};

/// Everything a loader's iterators share: the dataset, the batch maker and the options.
template <class Batch>
struct LoaderCore {
    std::size_t num_items = 0;
    std::size_t batch_size = 1;
    std::size_t num_workers = 0;
    std::size_t prefetch = 2;
    std::optional<std::uint64_t> seed;
    /// The batch of the items at these dataset indices.
    std::function<Batch(const std::vector<std::size_t>& indices)> make;

    /// The dataset order of epoch `epoch`: a permutation drawn from (seed, epoch), or identity.
    std::vector<std::size_t> order(std::size_t epoch) const {
        if (!seed) {
            std::vector<std::size_t> o(num_items);
            for (std::size_t i = 0; i < num_items; ++i) o[i] = i;
            return o;
        }
        return permutation(num_items, mix64(*seed ^ mix64(epoch + 0x5eed)));
    }
};

}  // namespace detail

/// The progress of an epoch, as Burn's DataLoaderIterator reports it.
struct Progress {
    std::size_t items_processed;  ///< items in the batches handed out so far
    std::size_t items_total;      ///< items in the epoch
};

/// One epoch of a data loader: `next()` gives the batches in order, then std::nullopt; it is
/// also an input range for range-for. Destroying it mid-epoch stops its workers.
template <class Batch>
class DataLoaderIterator {
  public:
    /// Epoch `epoch` of the loader described by `core`.
    DataLoaderIterator(std::shared_ptr<const detail::LoaderCore<Batch>> core, std::size_t epoch)
        : core_(std::move(core)), epoch_(epoch) {
        auto order = std::make_shared<const std::vector<std::size_t>>(core_->order(epoch));
        const std::size_t n = core_->num_items, bs = core_->batch_size;
        pool_ = std::make_unique<detail::BatchPool>(
            num_batches(), core_->num_workers, core_->prefetch,
            [core = core_, order, n, bs](std::size_t b) -> std::shared_ptr<void> {
                const std::size_t begin = b * bs, end = std::min(n, begin + bs);
                std::vector<std::size_t> idx(order->begin() + static_cast<std::ptrdiff_t>(begin),
                                             order->begin() + static_cast<std::ptrdiff_t>(end));
                return std::make_shared<Batch>(core->make(idx));
            });
    }

    /// The next batch, or std::nullopt at the end of the epoch. Rethrows (as the same type) an
    /// exception the dataset or the batcher threw for this batch; the epoch then ends.
    std::optional<Batch> next() {
        std::shared_ptr<void> p = pool_->next();
        if (!p) return std::nullopt;
        return std::optional<Batch>(std::move(*static_cast<Batch*>(p.get())));
    }
    /// Items handed out so far, of the epoch's total.
    Progress progress() const {
        return {std::min(core_->num_items, pool_->taken() * core_->batch_size), core_->num_items};
    }
    /// The epoch number this iterator walks.
    std::size_t epoch() const { return epoch_; }
    /// The number of batches of the epoch.
    std::size_t num_batches() const {
        return (core_->num_items + core_->batch_size - 1) / core_->batch_size;
    }

    /// Range-for support: an input iterator over the remaining batches.
    class iterator {
      public:
        using value_type = Batch;
        using difference_type = std::ptrdiff_t;
        iterator() = default;
        explicit iterator(DataLoaderIterator* it) : it_(it) { ++*this; }
        Batch& operator*() const { return **current_; }
        Batch* operator->() const { return &**current_; }
        iterator& operator++() {
            current_ = std::make_shared<std::optional<Batch>>(it_->next());
            if (!*current_) it_ = nullptr;
            return *this;
        }
        void operator++(int) { ++*this; }
        friend bool operator==(const iterator& a, std::default_sentinel_t) { return !a.it_; }

      private:
        DataLoaderIterator* it_ = nullptr;
        std::shared_ptr<std::optional<Batch>> current_;
    };
    /// The first remaining batch (computes it).
    iterator begin() { return iterator(this); }
    /// The end of the epoch.
    std::default_sentinel_t end() const { return {}; }

  private:
    std::shared_ptr<const detail::LoaderCore<Batch>> core_;
    std::size_t epoch_;
    std::unique_ptr<detail::BatchPool> pool_;
};

/// A data loader (Burn's DataLoader): `iter()` walks one epoch and advances the epoch counter,
/// so each call gives the next epoch (a new order when shuffling). Copies share the dataset and
/// batcher and keep their own epoch counter.
template <class Batch>
class DataLoader {
  public:
    /// Built by DataLoaderBuilder.
    explicit DataLoader(std::shared_ptr<const detail::LoaderCore<Batch>> core)
        : core_(std::move(core)) {}

    /// The next epoch's batches.
    DataLoaderIterator<Batch> iter() { return DataLoaderIterator<Batch>(core_, epoch_++); }
    /// Makes the next `iter()` walk epoch `epoch` (0-based): a resumed run reproduces the order.
    void set_epoch(std::size_t epoch) { epoch_ = epoch; }
    /// The epoch the next `iter()` walks.
    std::size_t epoch() const { return epoch_; }
    /// The number of items per epoch.
    std::size_t num_items() const { return core_->num_items; }
    /// The number of batches per epoch (the last may be smaller).
    std::size_t num_batches() const {
        return (core_->num_items + core_->batch_size - 1) / core_->batch_size;
    }
    /// The batch size.
    std::size_t batch_size() const { return core_->batch_size; }
    /// The number of worker threads (0: batches are made on the calling thread).
    std::size_t num_workers() const { return core_->num_workers; }

  private:
    std::shared_ptr<const detail::LoaderCore<Batch>> core_;
    std::size_t epoch_ = 0;
};

/// Configures and builds a DataLoader (Burn's DataLoaderBuilder). The batcher's `batch` member
/// must be a single non-template const function `Batch batch(std::vector<Item>, Device) const`
/// (the device by value or const reference), from which the builder learns the item, device and
/// batch types.
template <class Bt>
class DataLoaderBuilder {
    using Fn = detail::BatchFn<decltype(&Bt::batch)>;

  public:
    /// The item type the batcher takes.
    using Item = typename Fn::Item;
    /// The device type batches are made on.
    using Device = typename Fn::Device;
    /// The batch type.
    using Batch = typename Fn::Batch;

    /// A builder for loaders batching with `batcher` (batch size 1, in order, no workers, the
    /// default device).
    explicit DataLoaderBuilder(Bt batcher) : batcher_(std::move(batcher)) {}

    /// Items per batch; throws ArgumentError for 0.
    DataLoaderBuilder& batch_size(std::size_t n) {
        EMBER_CHECK(n > 0, Argument,
                    "DataLoaderBuilder::batch_size: the batch size must be "
                    "positive, got 0");
        batch_size_ = n;
        return *this;
    }
    /// Shuffles the items each epoch, with an order drawn from `seed` and the epoch number.
    DataLoaderBuilder& shuffle(std::uint64_t seed) {
        seed_ = seed;
        return *this;
    }
    /// Prepares batches on `n` worker threads (0: on the caller's thread, when asked).
    DataLoaderBuilder& num_workers(std::size_t n) {
        num_workers_ = n;
        return *this;
    }
    /// How many batches workers may finish ahead of the caller (default 2 per worker);
    /// throws ArgumentError for 0.
    DataLoaderBuilder& prefetch(std::size_t n) {
        EMBER_CHECK(n > 0, Argument, "DataLoaderBuilder::prefetch: must be positive, got 0");
        prefetch_ = n;
        return *this;
    }
    /// The device batches are made on (Burn's set_device).
    DataLoaderBuilder& set_device(Device device) {
        device_ = std::move(device);
        return *this;
    }

    /// The loader of `dataset`, whose items must be the batcher's; throws ArgumentError when
    /// the dataset is empty.
    template <Dataset D>
    requires std::same_as<ItemOf<D>, Item> DataLoader<Batch> build(D dataset)
    const {
        const std::size_t n = dataset.len();
        EMBER_CHECK(n > 0, Argument, "DataLoaderBuilder::build: the dataset is empty");
        auto core = std::make_shared<detail::LoaderCore<Batch>>();
        core->num_items = n;
        core->batch_size = batch_size_;
        core->num_workers = num_workers_;
        core->prefetch = prefetch_ ? *prefetch_ : std::max<std::size_t>(2, 2 * num_workers_);
        core->seed = seed_;
        core->make = [ds = std::move(dataset), batcher = batcher_,
                      device = device_](const std::vector<std::size_t>& indices) -> Batch {
            std::vector<Item> items;
            items.reserve(indices.size());
            for (std::size_t i : indices) {
                std::optional<Item> item = ds.get(i);
                EMBER_CHECK(item.has_value(), Index,
                            "DataLoader: the dataset gave no item at index ", i,
                            " although its length was ", ds.len());
                items.push_back(std::move(*item));
            }
            return batcher.batch(std::move(items), device);
        };
        return DataLoader<Batch>(std::move(core));
    }

  private:
    Bt batcher_;
    std::size_t batch_size_ = 1;
    std::size_t num_workers_ = 0;
    std::optional<std::size_t> prefetch_;
    std::optional<std::uint64_t> seed_;
    Device device_{};
};

}  // namespace ember::data
