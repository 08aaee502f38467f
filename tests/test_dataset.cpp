// Datasets: InMemDataset (vectors and CSV files), SqliteDataset and its writer, DynDataset and
// every transformation, checked against hand-worked expectations.
#include <ember/data/dataset.hpp>
#include <ember/data/sqlite.hpp>
#include <ember/data/transform.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>

#include "harness.hpp"

namespace test_dataset {

namespace fs = std::filesystem;
using namespace ember::data;

namespace {

// A fresh directory, removed with everything in it when the test ends.
struct DataTempDir {
    fs::path path;
    DataTempDir() {
        std::random_device rd;
        path = fs::temp_directory_path() /
               ("ember-dataset-test-" + std::to_string(rd()) + std::to_string(rd()));
        fs::create_directories(path);
    }
    ~DataTempDir() {
        std::error_code ec;
        fs::remove_all(path, ec);
    }
    fs::path write(const std::string& name, const std::string& text) const {
        std::ofstream(path / name, std::ios::binary) << text;
        return path / name;
    }
    std::size_t count() const {
        return static_cast<std::size_t>(std::distance(fs::directory_iterator(path), {}));
    }
};

struct Person {
    std::string name;
    std::int64_t age = 0;
    double score = 0;
    std::optional<int> rank;
    bool active = false;
    EMBER_RECORD(Person, name, age, score, rank, active)
};

struct Small {
    std::uint8_t level = 0;
    EMBER_RECORD(Small, level)
};

struct Sample {
    std::string text;
    std::vector<std::int64_t> tokens;
    ember::TensorData image;
    std::int64_t label = 0;
    EMBER_RECORD(Sample, text, tokens, image, label)
};

struct Other {
    std::string missing_field;
    EMBER_RECORD(Other, missing_field)
};

// The items of a dataset, in order.
template <Dataset D>
std::vector<ItemOf<D>> all(const D& d) {
    std::vector<ItemOf<D>> out;
    for (std::size_t i = 0; i < d.len(); ++i) out.push_back(*d.get(i));
    return out;
}

// The message of the ember::Error `f` throws (fails the test when it throws nothing).
template <class E, class F>
std::string error_of(F&& f) {
    try {
        f();
    } catch (const E& e) {
        return e.what();
    }
    FAIL("no exception thrown");
    return {};
}

InMemDataset<int> range_dataset(int n) {
    std::vector<int> v(static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) v[static_cast<std::size_t>(i)] = i;
    return InMemDataset<int>(v);
}

}  // namespace

static_assert(Dataset<InMemDataset<int>>);
static_assert(Dataset<DynDataset<std::string>>);
static_assert(Dataset<SqliteDataset<Sample>>);
static_assert(std::same_as<ItemOf<WindowsDataset<InMemDataset<int>>>, std::vector<int>>);
static_assert(!Dataset<std::vector<int>>);

TEST_CASE("InMemDataset holds its items and shares them between copies", "[data]") {
    const InMemDataset<std::string> ds({"a", "b", "c"});
    CHECK(ds.len() == 3);
    CHECK_FALSE(ds.is_empty());
    CHECK(ds.get(0) == std::optional<std::string>("a"));
    CHECK(ds.get(2) == std::optional<std::string>("c"));
    CHECK_FALSE(ds.get(3).has_value());
    const InMemDataset<std::string> copy = ds;
    CHECK(&copy.items() == &ds.items());
    CHECK(InMemDataset<int>({}).is_empty());
    CHECK(is_empty(InMemDataset<int>({})));
}

TEST_CASE("DynDataset erases the dataset's type", "[data]") {
    DynDataset<int> d = range_dataset(4);
    CHECK(d.len() == 4);
    CHECK(d.get(3) == std::optional<int>(3));
    CHECK_FALSE(d.get(4).has_value());
    auto shared = std::make_shared<const InMemDataset<int>>(std::vector<int>{7, 8});
    DynDataset<int> s(shared);
    CHECK(all(s) == std::vector<int>{7, 8});
    CHECK_THROWS_AS(DynDataset<int>(std::shared_ptr<const InMemDataset<int>>()),
                    ember::ArgumentError);
}

TEST_CASE("from_csv reads typed fields by column name", "[data]") {
    DataTempDir dir;
    // Columns out of field order, an extra column, quotes with delimiters, doubled quotes and a
    // newline, CRLF line ends, an empty optional, a blank last line.
    const auto file = dir.write("people.csv",
                                "age,extra,name,score,rank,active\r\n"
                                "31,x,\"Smith, Ann\",1.5,2,true\r\n"
                                "-4,y,\"say \"\"hi\"\"\nbye\",2e3,,0\r\n"
                                "+7,z,plain,-0.25,10,FALSE\r\n"
                                "\r\n");
    const auto ds = InMemDataset<Person>::from_csv(file);
    REQUIRE(ds.len() == 3);
    const Person a = *ds.get(0), b = *ds.get(1), c = *ds.get(2);
    CHECK(a.name == "Smith, Ann");
    CHECK(a.age == 31);
    CHECK(a.score == 1.5);
    CHECK(a.rank == std::optional<int>(2));
    CHECK(a.active);
    CHECK(b.name == "say \"hi\"\nbye");
    CHECK(b.age == -4);
    CHECK(b.score == 2000.0);
    CHECK_FALSE(b.rank.has_value());
    CHECK_FALSE(b.active);
    CHECK(c.name == "plain");
    CHECK(c.age == 7);
    CHECK(c.score == -0.25);
    CHECK(c.rank == std::optional<int>(10));
    CHECK_FALSE(c.active);
}

TEST_CASE("from_csv takes other delimiters", "[data]") {
    DataTempDir dir;
    const auto file = dir.write("s.tsv", "level\n3\n255\n");
    CsvOptions tsv;
    tsv.delimiter = '\t';
    const auto ds = InMemDataset<Small>::from_csv(file, tsv);
    REQUIRE(ds.len() == 2);
    CHECK(ds.get(1)->level == 255);
    CsvOptions bad;
    bad.delimiter = '"';
    CHECK_THROWS_AS(InMemDataset<Small>::from_csv(file, bad), ember::ArgumentError);
}

TEST_CASE("from_csv errors name the file, line and column", "[data]") {
    DataTempDir dir;
    const std::string header = "name,age,score,rank,active\n";
    auto fails = [&](const std::string& name, const std::string& text) {
        const auto file = dir.write(name, text);
        return error_of<ember::FormatError>([&] { InMemDataset<Person>::from_csv(file); });
    };
    // Line 3, column 2: "age" is not an integer.
    std::string m = fails("a.csv", header + "ann,1,0.5,,true\nbob,old,1,,true\n");
    CHECK_THAT(m, Catch::Contains("a.csv:3:2 (column 'age')"));
    CHECK_THAT(m, Catch::Contains("expected an integer, got 'old'"));
    m = fails("b.csv", header + "ann,1,zero,,true\n");
    CHECK_THAT(m, Catch::Contains("b.csv:2:3 (column 'score')"));
    m = fails("c.csv", header + "ann,1,0,,maybe\n");
    CHECK_THAT(m, Catch::Contains("c.csv:2:5 (column 'active')"));
    // An empty cell for a required number.
    m = fails("d.csv", header + "ann,,0,,1\n");
    CHECK_THAT(m, Catch::Contains("d.csv:2:2"));
    // Wrong field count, counted on the line the record starts on (after a two-line record).
    m = fails("e.csv", header + "\"a\nb\",1,0,,1\nann,1,0\n");
    CHECK_THAT(m, Catch::Contains("e.csv:4: 3 fields, but the header has 5"));
    m = fails("f.csv", header + "ann,1,0,,1\n\"unterminated,1,0,,1\n");
    CHECK_THAT(m, Catch::Contains("f.csv:3:1: the quote opened here is never closed"));
    m = fails("g.csv", "name,age,score,active\nann,1,0,1\n");
    CHECK_THAT(m, Catch::Contains("no column 'rank'"));
    CHECK_THAT(m, Catch::Contains("'name', 'age', 'score', 'active'"));
    m = fails("h.csv", "");
    CHECK_THAT(m, Catch::Contains("h.csv: empty CSV file"));
    m = fails("i.csv", "name,name\n");
    CHECK_THAT(m, Catch::Contains("column 'name' also names column 1"));
    m = fails("j.csv", header + "\"ann\"x,1,0,,1\n");
    CHECK_THAT(m, Catch::Contains("j.csv:2:1: text after the closing quote"));
    m = error_of<ember::FormatError>(
        [&] { InMemDataset<Person>::from_csv(dir.path / "missing.csv"); });
    CHECK_THAT(m, Catch::Contains("missing.csv: no such file (the CSV file)"));
    // A value out of the field's range, reported by the record layer with the cell's place.
    const auto small = dir.write("k.csv", "level\n12\n256\n");
    m = error_of<ember::FormatError>([&] { InMemDataset<Small>::from_csv(small); });
    CHECK_THAT(m, Catch::Contains("k.csv:3:1 (column 'level')"));
    CHECK_THAT(m, Catch::Contains("out of range for uint8"));
}

TEST_CASE("SqliteDataset reads back what SqliteDatasetWriter wrote", "[data]") {
    DataTempDir dir;
    const auto file = dir.path / "samples.db";
    std::vector<Sample> train;
    for (int i = 0; i < 5; ++i) {
        train.push_back({"item " + std::to_string(i),
                         {i, -i, 1000000000000LL * i},
                         ember::TensorData(std::vector<float>{0.5f * i, -1.f, 3.25f}, {1, 3}),
                         i % 2});
    }
    {
        SqliteDatasetWriter<Sample> w(file);
        w.write_all("train", train);
        CHECK(w.write("test", train[3]) == 0);
        CHECK(w.write("test", train[0]) == 1);
        CHECK(w.len("train") == 5);
        CHECK(w.len("none") == 0);
        CHECK_FALSE(fs::exists(file));  // nothing appears before the commit
        w.commit();
        CHECK_THROWS_AS(w.write("train", train[0]), ember::ArgumentError);
    }
    CHECK(dir.count() == 1);  // no temporary file left
    CHECK(SqliteDataset<Sample>::splits(file) == std::vector<std::string>{"test", "train"});
    const SqliteDataset<Sample> ds(file, "train");
    REQUIRE(ds.len() == 5);
    for (std::size_t i = 0; i < 5; ++i) {
        const Sample s = *ds.get(i);
        CHECK(s.text == train[i].text);
        CHECK(s.tokens == train[i].tokens);
        CHECK(s.label == train[i].label);
        CHECK(s.image.shape() == ember::Shape({1, 3}));
        CHECK(s.image.to_vec<float>() == train[i].image.to_vec<float>());
    }
    CHECK_FALSE(ds.get(5).has_value());
    const SqliteDataset<Sample> test(file, "test");
    REQUIRE(test.len() == 2);
    CHECK(test.get(0)->text == "item 3");
    CHECK(test.get(1)->text == "item 0");
}

TEST_CASE("SqliteDataset errors", "[data]") {
    DataTempDir dir;
    const auto file = dir.path / "d.db";
    std::string m = error_of<ember::FormatError>([&] { SqliteDataset<Sample>(file, "train"); });
    CHECK_THAT(m, Catch::Contains("d.db: no such file"));
    const auto text =
        dir.write("text.db", "this is not a database, just some text.................");
    m = error_of<ember::FormatError>([&] { SqliteDataset<Sample>(text, "train"); });
    CHECK_THAT(m, Catch::Contains("text.db: not an ember dataset file"));
    {
        SqliteDatasetWriter<Sample> w(file);
        w.write("train", Sample{"a", {1}, ember::TensorData(std::vector<float>{1.f}, {1}), 0});
        CHECK_THROWS_AS(w.write("", Sample{}), ember::ArgumentError);
        w.commit();
    }
    m = error_of<ember::ArgumentError>([&] { SqliteDataset<Sample>(file, "valid"); });
    CHECK_THAT(m, Catch::Contains("has no split 'valid' (splits: 'train')"));
    // An item of another type: the record layer names the missing field and the row.
    const SqliteDataset<Other> other(file, "train");
    m = error_of<ember::FormatError>([&] { other.get(0); });
    CHECK_THAT(m, Catch::Contains("missing field"));
    CHECK_THAT(m, Catch::Contains("train row 0"));
    // Existing files are kept unless overwriting is asked for.
    m = error_of<ember::ArgumentError>([&] { SqliteDatasetWriter<Sample> w(file); });
    CHECK_THAT(m, Catch::Contains("already exists"));
    {
        SqliteDatasetWriter<Sample> w(file, /*overwrite=*/true);
        w.write("other", Sample{"b", {}, ember::TensorData(std::vector<float>{2.f}, {1}), 1});
        // Destroyed without commit: the old file stays, the temporary file goes.
    }
    CHECK(dir.count() == 2);
    CHECK(SqliteDataset<Sample>::splits(file) == std::vector<std::string>{"train"});
    {
        SqliteDatasetWriter<Sample> w(file, /*overwrite=*/true);
        w.write("other", Sample{"b", {}, ember::TensorData(std::vector<float>{2.f}, {1}), 1});
        w.commit();
    }
    CHECK(SqliteDataset<Sample>::splits(file) == std::vector<std::string>{"other"});
    CHECK(SqliteDataset<Sample>(file, "other").get(0)->text == "b");
}

TEST_CASE("The data layer's generator is SplitMix64", "[data]") {
    // SplitMix64's published first outputs for seed 0.
    detail::Rng rng(0);
    CHECK(rng.next() == 0xe220a8397b1dcdafULL);
    CHECK(rng.next() == 0x6e789e6aa1b965f4ULL);
    detail::Rng r2(5);
    for (int i = 0; i < 1000; ++i) CHECK(r2.uniform(3) < 3);
    CHECK(detail::Rng(9).uniform(1) == 0);
}

TEST_CASE("ShuffledDataset is a seeded permutation", "[data]") {
    const auto ds = range_dataset(50);
    const ShuffledDataset s1(ds, 7), s1b(ds, 7), s2(ds, 8);
    auto items = all(s1);
    CHECK(items == all(s1b));
    CHECK(items != all(s2));
    CHECK(items != all(ds));
    for (std::size_t i = 0; i < 50; ++i) CHECK(items[i] == static_cast<int>(s1.indices()[i]));
    std::sort(items.begin(), items.end());
    CHECK(items == all(ds));
    CHECK_FALSE(s1.get(50).has_value());
    CHECK(ShuffledDataset(range_dataset(0), 1).is_empty());
}

TEST_CASE("PartialDataset is a range of items", "[data]") {
    const auto ds = range_dataset(10);
    const PartialDataset p(ds, 3, 7);
    CHECK(all(p) == std::vector<int>{3, 4, 5, 6});
    CHECK_FALSE(p.get(4).has_value());
    CHECK(PartialDataset(ds, 10, 10).is_empty());
    CHECK_THROWS_AS(PartialDataset(ds, 4, 11), ember::IndexError);
    CHECK_THROWS_AS(PartialDataset(ds, 5, 4), ember::IndexError);
}

TEST_CASE("MapperDataset maps items lazily", "[data]") {
    auto calls = std::make_shared<int>(0);
    const MapperDataset m(range_dataset(4), [calls](int x) {
        ++*calls;
        return std::to_string(x * x);
    });
    static_assert(std::same_as<ItemOf<decltype(m)>, std::string>);
    CHECK(*calls == 0);
    CHECK(m.len() == 4);
    CHECK(m.get(3) == std::optional<std::string>("9"));
    CHECK(*calls == 1);
    CHECK(all(m) == std::vector<std::string>{"0", "1", "4", "9"});
    CHECK_FALSE(m.get(4).has_value());
}

TEST_CASE("ComposedDataset concatenates datasets", "[data]") {
    const ComposedDataset<DynDataset<int>> c(
        {DynDataset<int>(range_dataset(2)), DynDataset<int>(range_dataset(0)),
         DynDataset<int>(PartialDataset(range_dataset(9), 5, 8))});
    CHECK(c.len() == 5);
    CHECK(all(c) == std::vector<int>{0, 1, 5, 6, 7});
    CHECK_FALSE(c.get(5).has_value());
    CHECK(ComposedDataset<InMemDataset<int>>({}).is_empty());
}

TEST_CASE("WindowsDataset gives overlapping windows", "[data]") {
    const WindowsDataset w(range_dataset(5), 3);
    CHECK(w.len() == 3);
    CHECK(all(w) == std::vector<std::vector<int>>{{0, 1, 2}, {1, 2, 3}, {2, 3, 4}});
    CHECK_FALSE(w.get(3).has_value());
    CHECK(WindowsDataset(range_dataset(5), 5).len() == 1);
    CHECK(WindowsDataset(range_dataset(2), 3).is_empty());
    CHECK_THROWS_AS(WindowsDataset(range_dataset(2), 0), ember::ArgumentError);
}

TEST_CASE("SamplerDataset without replacement walks permutations", "[data]") {
    const auto ds = range_dataset(10);
    const auto s = SamplerDataset<InMemDataset<int>>::without_replacement(ds, 25, 3);
    CHECK(s.len() == 25);
    auto items = all(s);
    // Items 0-9 and 10-19 are each a permutation; 20-24 are five distinct items.
    for (std::size_t block : {0u, 10u}) {
        std::vector<int> b(items.begin() + block, items.begin() + block + 10);
        std::sort(b.begin(), b.end());
        CHECK(b == all(ds));
    }
    std::vector<int> tail(items.begin() + 20, items.end());
    std::sort(tail.begin(), tail.end());
    CHECK(std::adjacent_find(tail.begin(), tail.end()) == tail.end());
    CHECK(items == all(SamplerDataset<InMemDataset<int>>::without_replacement(ds, 25, 3)));
    CHECK_FALSE(s.get(25).has_value());
}

TEST_CASE("SamplerDataset with replacement draws uniformly", "[data]") {
    const auto ds = range_dataset(4);
    const SamplerDataset s(ds, 40000, 11);
    std::vector<int> counts(4, 0);
    for (int x : all(s)) ++counts[static_cast<std::size_t>(x)];
    // Each count is Binomial(40000, 1/4): mean 10000, sd sqrt(40000 * 3/16) ≈ 86.6; allow 5 sd.
    for (int c : counts) CHECK(std::abs(c - 10000) < 433);
    // Drawing with replacement repeats items: 10 draws from 10 items are all distinct with
    // probability 10!/10^10 ≈ 0.04%.
    const auto small =
        SamplerDataset<InMemDataset<int>>::with_replacement(range_dataset(10), 10, 5);
    auto items = all(small);
    std::sort(items.begin(), items.end());
    CHECK(std::adjacent_find(items.begin(), items.end()) != items.end());
    CHECK(all(small) == all(SamplerDataset(range_dataset(10), 10, 5)));
    CHECK_THROWS_AS(SamplerDataset(range_dataset(0), 3, 1), ember::ArgumentError);
    CHECK(SamplerDataset(range_dataset(0), 0, 1).is_empty());
}

}  // namespace test_dataset
