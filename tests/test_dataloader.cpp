// The data loader: batches in order, shuffling per seed and epoch, the same batches for any
// number of workers, the last partial batch, progress, errors from workers, and stopping
// mid-epoch.
#include <ember/data/dataloader.hpp>
#include <ember/data/sqlite.hpp>
#include <ember/data/transform.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <random>
#include <set>
#include <thread>

#include "harness.hpp"

namespace test_dataloader {

using namespace ember::data;
using CpuDevice = ember::Device<ember::Cpu>;

namespace {

// Batches are the item lists themselves: what the loader chose is visible.
struct ListBatcher {
    std::vector<int> batch(std::vector<int> items, const CpuDevice&) const { return items; }
};

// A real batch: the items as a float tensor on the device.
struct TensorBatcher {
    ember::Tensor<ember::Cpu, 1> batch(std::vector<int> items, const CpuDevice& device) const {
        std::vector<float> v(items.begin(), items.end());
        const auto n = v.size();
        return ember::Tensor<ember::Cpu, 1>::from_data(ember::TensorData(std::move(v), {n}),
                                                       device);
    }
};

// Throws for any batch holding item `bad`, and is slow otherwise (so that workers run ahead).
struct FailingBatcher {
    int bad;
    std::vector<int> batch(std::vector<int> items, const CpuDevice&) const {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        for (int i : items) EMBER_CHECK(i != bad, Index, "FailingBatcher: item ", i);
        return items;
    }
};

// Counts its calls and sleeps, to stop loaders mid-epoch.
struct SlowBatcher {
    std::shared_ptr<std::atomic<int>> calls = std::make_shared<std::atomic<int>>(0);
    std::vector<int> batch(std::vector<int> items, const CpuDevice&) const {
        ++*calls;
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
        return items;
    }
};

InMemDataset<int> range_dataset(int n) {
    std::vector<int> v(static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) v[static_cast<std::size_t>(i)] = i;
    return InMemDataset<int>(v);
}

// Every batch of the loader's next epoch.
std::vector<std::vector<int>> epoch(DataLoader<std::vector<int>>& loader) {
    std::vector<std::vector<int>> out;
    for (const auto& b : loader.iter()) out.push_back(b);
    return out;
}

std::vector<int> flatten(const std::vector<std::vector<int>>& batches) {
    std::vector<int> out;
    for (const auto& b : batches) out.insert(out.end(), b.begin(), b.end());
    return out;
}

}  // namespace

static_assert(Batcher<ListBatcher, int, CpuDevice>);
static_assert(std::same_as<DataLoaderBuilder<TensorBatcher>::Batch, ember::Tensor<ember::Cpu, 1>>);

TEST_CASE("DataLoader batches in order, the last batch partial", "[dataloader]") {
    for (std::size_t workers : {0u, 2u}) {
        auto loader = DataLoaderBuilder(ListBatcher{})
                          .batch_size(3)
                          .num_workers(workers)
                          .build(range_dataset(10));
        CHECK(loader.num_items() == 10);
        CHECK(loader.num_batches() == 4);
        CHECK(loader.batch_size() == 3);
        CHECK(loader.num_workers() == workers);
        const std::vector<std::vector<int>> expected{{0, 1, 2}, {3, 4, 5}, {6, 7, 8}, {9}};
        CHECK(epoch(loader) == expected);
        CHECK(epoch(loader) == expected);  // no shuffling: every epoch alike
        CHECK(loader.epoch() == 2);
    }
    auto exact = DataLoaderBuilder(ListBatcher{}).batch_size(5).build(range_dataset(10));
    CHECK(epoch(exact) == std::vector<std::vector<int>>{{0, 1, 2, 3, 4}, {5, 6, 7, 8, 9}});
    auto one = DataLoaderBuilder(ListBatcher{}).build(range_dataset(2));
    CHECK(epoch(one) == std::vector<std::vector<int>>{{0}, {1}});
}

TEST_CASE("DataLoader next() and progress", "[dataloader]") {
    auto loader =
        DataLoaderBuilder(ListBatcher{}).batch_size(4).num_workers(1).build(range_dataset(10));
    auto it = loader.iter();
    CHECK(it.epoch() == 0);
    CHECK(it.num_batches() == 3);
    CHECK(it.progress().items_processed == 0);
    CHECK(it.progress().items_total == 10);
    CHECK(it.next() == std::optional<std::vector<int>>({0, 1, 2, 3}));
    CHECK(it.progress().items_processed == 4);
    it.next();
    CHECK(it.next() == std::optional<std::vector<int>>({8, 9}));
    CHECK(it.progress().items_processed == 10);
    CHECK_FALSE(it.next().has_value());
    CHECK_FALSE(it.next().has_value());
}

TEST_CASE("DataLoader makes batches with the batcher on the device", "[dataloader]") {
    auto loader = DataLoaderBuilder(TensorBatcher{})
                      .batch_size(2)
                      .num_workers(2)
                      .set_device(CpuDevice{})
                      .build(MapperDataset(range_dataset(5), [](int x) { return 10 * x; }));
    std::vector<std::vector<float>> got;
    for (const auto& t : loader.iter()) got.push_back(t.to_data().to_vec<float>());
    CHECK(got == std::vector<std::vector<float>>{{0.f, 10.f}, {20.f, 30.f}, {40.f}});
}

TEST_CASE("DataLoader shuffles by seed and epoch, the same for any number of workers",
          "[dataloader]") {
    const auto ds = range_dataset(23);
    auto make = [&](std::uint64_t seed, std::size_t workers) {
        return DataLoaderBuilder(ListBatcher{})
            .batch_size(4)
            .shuffle(seed)
            .num_workers(workers)
            .build(ds);
    };
    auto l0 = make(42, 0), l1 = make(42, 1), l3 = make(42, 3);
    std::vector<std::vector<std::vector<int>>> epochs;
    for (int e = 0; e < 3; ++e) {
        const auto b0 = epoch(l0);
        CHECK(b0 == epoch(l1));
        CHECK(b0 == epoch(l3));
        REQUIRE(b0.size() == 6);
        for (std::size_t b = 0; b < 5; ++b) CHECK(b0[b].size() == 4);
        CHECK(b0[5].size() == 3);
        // Each epoch holds every item once.
        auto items = flatten(b0);
        std::sort(items.begin(), items.end());
        CHECK(items == range_dataset(23).items());
        epochs.push_back(b0);
    }
    // A new order each epoch, and a shuffled one.
    CHECK(epochs[0] != epochs[1]);
    CHECK(epochs[1] != epochs[2]);
    CHECK(flatten(epochs[0]) != range_dataset(23).items());
    // Another seed, another order.
    auto other = make(43, 0);
    CHECK(epoch(other) != epochs[0]);
    // A resumed run reproduces the epoch it resumes at.
    auto resumed = make(42, 3);
    resumed.set_epoch(2);
    CHECK(resumed.epoch() == 2);
    CHECK(epoch(resumed) == epochs[2]);
    CHECK(resumed.epoch() == 3);
    // Copies keep their own epoch counter.
    auto copy = l0;
    CHECK(copy.epoch() == 3);
    copy.set_epoch(0);
    CHECK(epoch(copy) == epochs[0]);
    CHECK(l0.epoch() == 3);
}

TEST_CASE("DataLoader builder errors", "[dataloader]") {
    DataLoaderBuilder builder(ListBatcher{});
    CHECK_THROWS_AS(builder.batch_size(0), ember::ArgumentError);
    CHECK_THROWS_AS(builder.prefetch(0), ember::ArgumentError);
    try {
        builder.build(range_dataset(0));
        FAIL("no exception thrown");
    } catch (const ember::ArgumentError& e) {
        CHECK_THAT(e.what(), Catch::Contains("the dataset is empty"));
    }
}

TEST_CASE("DataLoader rethrows a worker's exception as the same error", "[dataloader]") {
    for (std::size_t workers : {0u, 1u, 3u}) {
        auto loader = DataLoaderBuilder(FailingBatcher{7})
                          .batch_size(3)
                          .num_workers(workers)
                          .build(range_dataset(20));
        auto it = loader.iter();
        // Batches 0 and 1 (items 0-5) come out; batch 2 holds item 7.
        CHECK(it.next() == std::optional<std::vector<int>>({0, 1, 2}));
        CHECK(it.next() == std::optional<std::vector<int>>({3, 4, 5}));
        try {
            it.next();
            FAIL("no exception thrown");
        } catch (const ember::IndexError& e) {
            CHECK_THAT(e.what(), Catch::Contains("FailingBatcher: item 7"));
        }
        CHECK_FALSE(it.next().has_value());  // the epoch ended
        // The next epoch starts afresh (and fails at the same batch).
        auto again = loader.iter();
        CHECK(again.next().has_value());
    }
    // An error from the dataset (through a mapper) travels the same way.
    auto loader = DataLoaderBuilder(ListBatcher{})
                      .batch_size(2)
                      .num_workers(2)
                      .build(MapperDataset(range_dataset(6), [](int x) {
                          EMBER_CHECK(x != 4, Format, "bad item ", x);
                          return x;
                      }));
    std::vector<int> seen;
    CHECK_THROWS_AS(
        [&] {
            for (const auto& b : loader.iter()) seen.insert(seen.end(), b.begin(), b.end());
        }(),
        ember::FormatError);
    CHECK(seen == std::vector<int>{0, 1, 2, 3});
}

TEST_CASE("DataLoader stops cleanly mid-epoch", "[dataloader]") {
    SlowBatcher batcher;
    auto loader = DataLoaderBuilder(batcher).batch_size(1).num_workers(3).prefetch(4).build(
        range_dataset(1000));
    {
        auto it = loader.iter();
        CHECK(it.next() == std::optional<std::vector<int>>(std::vector<int>{0}));
    }  // destroyed with workers busy and the buffer filling: must not hang
    // Workers run at most `prefetch` batches ahead of the caller.
    CHECK(*batcher.calls <= 1 + 4 + 3);
    {
        auto it = loader.iter();  // never read
    }
    {
        // The iterator outlives its loader: it holds what it needs.
        std::optional<DataLoaderIterator<std::vector<int>>> it;
        {
            auto local = DataLoaderBuilder(ListBatcher{})
                             .batch_size(2)
                             .num_workers(2)
                             .build(range_dataset(4));
            it.emplace(local.iter());
        }
        CHECK(it->next() == std::optional<std::vector<int>>({0, 1}));
        CHECK(it->next() == std::optional<std::vector<int>>({2, 3}));
        CHECK_FALSE(it->next().has_value());
    }
}

TEST_CASE("DataLoader workers read a SqliteDataset concurrently", "[dataloader]") {
    std::random_device rd;
    const auto dir = std::filesystem::temp_directory_path() /
                     ("ember-dataloader-test-" + std::to_string(rd()) + std::to_string(rd()));
    std::filesystem::create_directories(dir);
    {
        SqliteDatasetWriter<int> w(dir / "ints.db");
        for (int i = 0; i < 200; ++i) w.write("train", i * 3);
        w.commit();
    }
    const SqliteDataset<int> ds(dir / "ints.db", "train");
    auto serial = DataLoaderBuilder(ListBatcher{}).batch_size(16).shuffle(5).build(ds);
    auto parallel =
        DataLoaderBuilder(ListBatcher{}).batch_size(16).shuffle(5).num_workers(4).build(ds);
    const auto a = epoch(serial), b = epoch(parallel);
    CHECK(a == b);
    auto items = flatten(b);
    std::sort(items.begin(), items.end());
    REQUIRE(items.size() == 200);
    for (int i = 0; i < 200; ++i) CHECK(items[static_cast<std::size_t>(i)] == 3 * i);
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
}

}  // namespace test_dataloader
