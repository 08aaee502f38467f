// The built-in datasets: MNIST's IDX reader on hand-made files (plain and gzipped) and every
// malformed-file error, the real Fashion-MNIST when Debian's package is installed, ImageFolder on
// images written here, and the fortunes on a hand-made directory and on Debian's.
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <ember/data/dataset.hpp>
#include <ember/data/text.hpp>
#include <ember/data/vision.hpp>
#include <fstream>
#include <map>
#include <set>

#include "harness.hpp"

#define STB_IMAGE_WRITE_IMPLEMENTATION
#include <stb/stb_image_write.h>
#undef STB_IMAGE_WRITE_IMPLEMENTATION

namespace test_datasets_builtin {

namespace fs = std::filesystem;
using namespace ember::data;
using Bytes = std::vector<std::uint8_t>;

static_assert(Dataset<MnistDataset>);
static_assert(Dataset<ImageFolderDataset>);
static_assert(Dataset<FortunesDataset>);

namespace {

// A fresh directory, removed with everything in it when the test ends.
struct TempDir {
    fs::path path;
    TempDir() {
        static std::atomic<int> counter{0};
        path = fs::temp_directory_path() /
               ("ember-datasets-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
        fs::remove_all(path);
        fs::create_directories(path);
    }
    ~TempDir() {
        std::error_code ec;
        fs::remove_all(path, ec);
    }
};

// Sets an environment variable for one scope, restoring the previous value after.
struct ScopedEnv {
    std::string name;
    std::optional<std::string> old;
    ScopedEnv(std::string n, const std::string& value) : name(std::move(n)) {
        if (const char* v = std::getenv(name.c_str())) old = v;
        ::setenv(name.c_str(), value.c_str(), 1);
    }
    ~ScopedEnv() {
        if (old)
            ::setenv(name.c_str(), old->c_str(), 1);
        else
            ::unsetenv(name.c_str());
    }
};

void write_file(const fs::path& p, const Bytes& b) {
    std::ofstream out(p, std::ios::binary);
    out.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}
void write_text(const fs::path& p, const std::string& s) {
    std::ofstream out(p, std::ios::binary);
    out << s;
}
void write_gz(const fs::path& p, const Bytes& b) {
    gzFile f = gzopen(p.c_str(), "wb");
    REQUIRE(f != nullptr);
    REQUIRE(gzwrite(f, b.data(), static_cast<unsigned>(b.size())) == static_cast<int>(b.size()));
    REQUIRE(gzclose(f) == Z_OK);
}
Bytes read_gz(const fs::path& p, std::size_t n) {
    gzFile f = gzopen(p.c_str(), "rb");
    REQUIRE(f != nullptr);
    Bytes b(n);
    REQUIRE(gzread(f, b.data(), static_cast<unsigned>(n)) == static_cast<int>(n));
    gzclose(f);
    return b;
}

void put_u32(Bytes& b, std::uint32_t v) {
    for (int s = 24; s >= 0; s -= 8) b.push_back(static_cast<std::uint8_t>(v >> s));
}
// An IDX file of unsigned bytes: magic 0,0,8,rank, then big-endian dims, then the values.
Bytes idx(const std::vector<std::uint32_t>& dims, const Bytes& values) {
    Bytes b{0, 0, 0x08, static_cast<std::uint8_t>(dims.size())};
    for (std::uint32_t d : dims) put_u32(b, d);
    b.insert(b.end(), values.begin(), values.end());
    return b;
}
// Pixel k of hand-made image i.
std::uint8_t pixel(std::size_t i, std::size_t k) {
    return static_cast<std::uint8_t>(i * 31 + k);
}
Bytes images_body(std::size_t n) {
    Bytes b;
    for (std::size_t i = 0; i < n; ++i)
        for (std::size_t k = 0; k < 784; ++k) b.push_back(pixel(i, k));
    return b;
}
const Bytes kLabels{9, 0, 5};
Bytes good_images() {
    return idx({3, 28, 28}, images_body(3));
}
Bytes good_labels() {
    return idx({3}, kLabels);
}

template <typename E, typename F>
std::string error_of(F&& f) {
    try {
        f();
    } catch (const E& e) {
        return e.what();
    }
    FAIL("no exception of the expected type");
    return {};
}

void check_hand_made(const MnistDataset& ds) {
    REQUIRE(ds.len() == 3);
    CHECK_FALSE(ds.is_empty());
    for (std::size_t i = 0; i < 3; ++i) {
        const auto item = ds.get(i);
        REQUIRE(item.has_value());
        CHECK(item->label == kLabels[i]);
        CHECK(ds.label(i) == kLabels[i]);
        for (std::size_t k : {0u, 1u, 27u, 28u, 400u, 783u}) {
            CHECK(item->image[k] == static_cast<float>(pixel(i, k)));
            CHECK(ds.pixels(i)[k] == pixel(i, k));
        }
    }
    CHECK_FALSE(ds.get(3).has_value());
    CHECK_THROWS_AS(ds.label(3), ember::IndexError);
    CHECK_THROWS_AS(ds.pixels(3), ember::IndexError);
}

}  // namespace

TEST_CASE("MnistDataset reads plain and gzipped IDX files", "[datasets]") {
    TempDir dir;
    write_file(dir.path / "train-images-idx3-ubyte", good_images());
    write_file(dir.path / "train-labels-idx1-ubyte", good_labels());
    write_gz(dir.path / "t10k-images-idx3-ubyte.gz", good_images());
    write_gz(dir.path / "t10k-labels-idx1-ubyte.gz", good_labels());

    const MnistDataset train = MnistDataset::train(dir.path);
    check_hand_made(train);
    CHECK(train.images_path() == dir.path / "train-images-idx3-ubyte");
    const MnistDataset test = MnistDataset::test(dir.path);
    check_hand_made(test);
    CHECK(test.labels_path() == dir.path / "t10k-labels-idx1-ubyte.gz");

    // Copies share the loaded data and stay valid after the original is gone.
    std::optional<MnistDataset> original = MnistDataset::train(dir.path);
    const MnistDataset copy = *original;
    CHECK(copy.pixels(0) == original->pixels(0));
    original.reset();
    check_hand_made(copy);
    CHECK(MnistDataset{}.len() == 0);
}

TEST_CASE("MnistDataset finds its files through EMBER_DATA_DIR", "[datasets]") {
    TempDir root;
    fs::create_directories(root.path / "mnist");
    write_gz(root.path / "mnist" / "train-images-idx3-ubyte.gz", good_images());
    write_gz(root.path / "mnist" / "train-labels-idx1-ubyte.gz", good_labels());
    ScopedEnv env("EMBER_DATA_DIR", root.path.string());
    const auto dirs = MnistDataset::default_dirs();
    REQUIRE(dirs.size() == 4);
    CHECK(dirs[0] == root.path / "fashion-mnist");
    CHECK(dirs[1] == root.path / "mnist");
    CHECK(dirs[2] == root.path);
    CHECK(dirs[3] == fs::path("/usr/share/datasets/fashion-mnist"));
    check_hand_made(MnistDataset::train());
}

TEST_CASE("MnistDataset reports missing and malformed files", "[datasets]") {
    SECTION("missing directory") {
        TempDir root;
        const fs::path nowhere = root.path / "nowhere";
        const std::string msg = error_of<ember::FormatError>([&] { MnistDataset::train(nowhere); });
        CHECK_THAT(msg, Catch::Contains(nowhere.string()));
        CHECK_THAT(msg, Catch::Contains("train-images-idx3-ubyte"));
        CHECK_THAT(msg, Catch::Contains("apt-get install dataset-fashion-mnist"));
        CHECK_THAT(msg, Catch::Contains("EMBER_DATA_DIR"));
    }
    SECTION("every default location is named") {
        TempDir root;
        ScopedEnv env("EMBER_DATA_DIR", root.path.string());
        // The test split is absent from the temp root; Debian's directory may or may not hold
        // it, so only check the message when nothing is found anywhere.
        try {
            MnistDataset::test();
        } catch (const ember::FormatError& e) {
            const std::string msg = e.what();
            CHECK_THAT(msg, Catch::Contains((root.path / "fashion-mnist").string()));
            CHECK_THAT(msg, Catch::Contains((root.path / "mnist").string()));
            CHECK_THAT(msg, Catch::Contains("/usr/share/datasets/fashion-mnist"));
        }
    }

    TempDir dir;
    const fs::path images = dir.path / "train-images-idx3-ubyte";
    const fs::path labels = dir.path / "train-labels-idx1-ubyte";
    write_file(labels, good_labels());
    auto fails_with = [&](const Bytes& image_bytes, const std::string& what) {
        write_file(images, image_bytes);
        const std::string msg =
            error_of<ember::FormatError>([&] { MnistDataset::train(dir.path); });
        CHECK_THAT(msg, Catch::Contains(images.string()));
        CHECK_THAT(msg, Catch::Contains(what));
        CHECK_THAT(msg, Catch::Contains("apt-get install dataset-fashion-mnist"));
    };

    SECTION("labels without images") {
        const std::string msg =
            error_of<ember::FormatError>([&] { MnistDataset::train(dir.path); });
        CHECK_THAT(msg, Catch::Contains(dir.path.string()));
    }
    SECTION("bad magic: another element type") {
        Bytes b = good_images();
        b[2] = 0x0D;  // float
        fails_with(b, "magic");
    }
    SECTION("bad magic: another rank") {
        fails_with(idx({3, 784}, images_body(3)), "magic");
    }
    SECTION("bad magic: nonzero leading bytes") {
        Bytes b = good_images();
        b[0] = 0x1f;
        fails_with(b, "magic");
    }
    SECTION("wrong image dims") {
        Bytes body = images_body(3);
        body.resize(3 * 28 * 27);
        fails_with(idx({3, 28, 27}, body), "28x27");
    }
    SECTION("truncated header") {
        fails_with(Bytes{0, 0, 8, 3, 0, 0}, "truncated");
    }
    SECTION("truncated body") {
        Bytes b = good_images();
        b.pop_back();
        fails_with(b, "truncated");
    }
    SECTION("bytes after the end") {
        Bytes b = good_images();
        b.push_back(0);
        fails_with(b, "after");
    }
    SECTION("image and label counts differ") {
        fails_with(idx({2, 28, 28}, images_body(2)), "2 images");
    }
    SECTION("label out of range") {
        write_file(images, good_images());
        write_file(labels, idx({3}, Bytes{1, 10, 2}));
        const std::string msg =
            error_of<ember::FormatError>([&] { MnistDataset::train(dir.path); });
        CHECK_THAT(msg, Catch::Contains(labels.string()));
        CHECK_THAT(msg, Catch::Contains("label 10 at item 1"));
    }
    SECTION("truncated gzip stream") {
        write_file(labels, good_labels());
        const fs::path gz = dir.path / "full.gz";
        write_gz(gz, good_images());
        Bytes packed(fs::file_size(gz));
        std::ifstream(gz, std::ios::binary)
            .read(reinterpret_cast<char*>(packed.data()),
                  static_cast<std::streamsize>(packed.size()));
        packed.resize(packed.size() / 2);
        write_file(dir.path / "train-images-idx3-ubyte.gz", packed);
        const std::string msg =
            error_of<ember::FormatError>([&] { MnistDataset::train(dir.path); });
        CHECK_THAT(msg, Catch::Contains("train-images-idx3-ubyte.gz"));
        CHECK_THAT(msg, Catch::Contains("truncated"));
    }
}

TEST_CASE("MnistDataset loads Debian's Fashion-MNIST", "[datasets]") {
    const fs::path debian = MnistDataset::debian_dir();
    if (!fs::exists(debian / "train-labels-idx1-ubyte.gz")) {
        WARN("dataset-fashion-mnist is not installed; skipping the real-data checks");
        return;
    }
    ScopedEnv env("EMBER_DATA_DIR", "/nonexistent-ember-data");  // falls through to Debian's
    const MnistDataset train = MnistDataset::train();
    const MnistDataset test = MnistDataset::test();
    REQUIRE(train.len() == 60000);
    REQUIRE(test.len() == 10000);
    CHECK(train.images_path() == debian / "train-images-idx3-ubyte.gz");

    // The raw bytes, read here without ember: the labels start at offset 8, the pixels at 16.
    const Bytes raw_labels = read_gz(debian / "train-labels-idx1-ubyte.gz", 8 + 10);
    const Bytes raw_pixels = read_gz(debian / "train-images-idx3-ubyte.gz", 16 + 784);
    CHECK(raw_labels[8] == 9);  // the first Fashion-MNIST training item is an ankle boot
    const auto first = train.get(0);
    REQUIRE(first.has_value());
    CHECK(first->label == 9);
    for (std::size_t i = 0; i < 10; ++i) CHECK(train.label(i) == raw_labels[8 + i]);
    for (std::size_t k = 0; k < 784; ++k)
        REQUIRE(first->image[k] == static_cast<float>(raw_pixels[16 + k]));

    // Fashion-MNIST is balanced: 6,000 training and 1,000 test images per class.
    std::array<std::size_t, 10> train_count{}, test_count{};
    for (std::size_t i = 0; i < train.len(); ++i) ++train_count[train.label(i)];
    for (std::size_t i = 0; i < test.len(); ++i) ++test_count[test.label(i)];
    for (std::size_t c = 0; c < 10; ++c) {
        CHECK(train_count[c] == 6000);
        CHECK(test_count[c] == 1000);
    }
    CHECK_FALSE(train.get(60000).has_value());
}

namespace {

// A w×h image of `c` channels whose byte j is (seed + 7j) mod 256.
Bytes pattern(int w, int h, int c, int seed) {
    Bytes b(static_cast<std::size_t>(w * h * c));
    for (std::size_t j = 0; j < b.size(); ++j) b[j] = static_cast<std::uint8_t>(seed + 7 * j);
    return b;
}

void check_image(const ImageDatasetItem& item, std::size_t h, std::size_t w, std::size_t c,
                 const Bytes& expected) {
    REQUIRE(item.image.dtype() == ember::DType::U8);
    REQUIRE(item.image.shape() == ember::Shape{h, w, c});
    const auto px = item.image.as_slice<std::uint8_t>();
    CHECK(Bytes(px.begin(), px.end()) == expected);
}

// root/cat/a.png (3x2 RGB), root/cat/b.bmp (2x2 RGB), root/dog/c.png (4x2 grey), plus files that
// are not images and a nested directory.
struct ImageTree {
    TempDir dir;
    Bytes a = pattern(2, 3, 3, 1), b = pattern(2, 2, 3, 50), c = pattern(4, 2, 1, 100);
    ImageTree() {
        const fs::path& r = dir.path;
        fs::create_directories(r / "cat");
        fs::create_directories(r / "dog" / "puppies");
        REQUIRE(stbi_write_png((r / "cat" / "a.png").c_str(), 2, 3, 3, a.data(), 2 * 3));
        REQUIRE(stbi_write_bmp((r / "cat" / "b.BMP").c_str(), 2, 2, 3, b.data()));
        REQUIRE(stbi_write_png((r / "dog" / "puppies" / "c.png").c_str(), 4, 2, 1, c.data(), 4));
        write_text(r / "dog" / "notes.txt", "not an image");
        write_text(r / "readme.png", "a file at the root is no class");
    }
};

}  // namespace

TEST_CASE("ImageFolderDataset classifies by subdirectory", "[datasets]") {
    ImageTree tree;
    const auto ds = ImageFolderDataset::new_classification(tree.dir.path);
    REQUIRE(ds.len() == 3);
    CHECK(ds.classes() == std::vector<std::string>{"cat", "dog"});
    CHECK(ds.num_classes() == 2);

    const auto a = ds.get(0), b = ds.get(1), c = ds.get(2);
    REQUIRE((a && b && c));
    CHECK(a->image_path == tree.dir.path / "cat" / "a.png");
    CHECK(a->label() == 0);
    check_image(*a, 3, 2, 3, tree.a);
    CHECK(b->image_path == tree.dir.path / "cat" / "b.BMP");  // extensions match in any case
    CHECK(b->labels() == std::vector<std::size_t>{0});
    check_image(*b, 2, 2, 3, tree.b);
    CHECK(c->label() == 1);
    check_image(*c, 2, 4, 1, tree.c);
    CHECK_FALSE(ds.get(3).has_value());

    // Forcing three channels replicates the grey value.
    const auto rgb = ds.with_channels(3).get(2);
    REQUIRE(rgb.has_value());
    Bytes grey3;
    for (std::uint8_t v : tree.c) grey3.insert(grey3.end(), {v, v, v});
    check_image(*rgb, 2, 4, 3, grey3);
    CHECK(ds.get(2)->image.shape() == ember::Shape{2, 4, 1});  // the original is unchanged
    CHECK_THROWS_AS(ds.with_channels(5), ember::ArgumentError);

    const auto png_only = ImageFolderDataset::new_classification_with(tree.dir.path, {".png"});
    REQUIRE(png_only.len() == 2);
    CHECK(png_only.get(1)->image_path == tree.dir.path / "dog" / "puppies" / "c.png");
}

TEST_CASE("ImageFolderDataset from items, multi-label, and its errors", "[datasets]") {
    ImageTree tree;
    const fs::path a = tree.dir.path / "cat" / "a.png",
                   c = tree.dir.path / "dog" / "puppies" / "c.png";

    const auto cls = ImageFolderDataset::new_classification_with_items({{c, "zebra"}, {a, "ant"}},
                                                                       {"zebra", "ant"});
    REQUIRE(cls.len() == 2);
    CHECK(cls.get(0)->label() == 0);  // labels follow the order of the classes given
    CHECK(cls.get(1)->label() == 1);

    const auto multi = ImageFolderDataset::new_multilabel_classification_with_items(
        {{a, {"dog", "cat", "dog"}}, {c, {}}}, {"cat", "dog", "fish"});
    REQUIRE(multi.len() == 2);
    CHECK(multi.num_classes() == 3);
    const auto m0 = multi.get(0);
    REQUIRE(m0.has_value());
    CHECK(m0->labels() == std::vector<std::size_t>{0, 1});
    CHECK(multi.get(1)->labels().empty());
    CHECK_THROWS_AS(m0->label(), ember::ArgumentError);
    check_image(*m0, 3, 2, 3, tree.a);

    CHECK_THROWS_AS(ImageFolderDataset::new_classification_with_items({{a, "bird"}}, {"cat"}),
                    ember::ArgumentError);
    CHECK_THROWS_AS(ImageFolderDataset::new_multilabel_classification_with_items(
                        {{a, {"cat", "bird"}}}, {"cat"}),
                    ember::ArgumentError);
    CHECK_THROWS_AS(ImageFolderDataset::new_classification_with_items({{a, "cat"}}, {"cat", "cat"}),
                    ember::ArgumentError);

    const fs::path missing = tree.dir.path / "missing";
    CHECK_THAT(
        error_of<ember::FormatError>([&] { ImageFolderDataset::new_classification(missing); }),
        Catch::Contains(missing.string()));
    TempDir empty;
    fs::create_directories(empty.path / "cat");
    write_text(empty.path / "cat" / "x.txt", "text");
    CHECK_THAT(
        error_of<ember::FormatError>([&] { ImageFolderDataset::new_classification(empty.path); }),
        Catch::Contains("no image files"));

    // A file with an image extension that is not an image fails when read, naming the file.
    write_text(tree.dir.path / "dog" / "broken.png", "not a png at all");
    const auto ds = ImageFolderDataset::new_classification(tree.dir.path);
    REQUIRE(ds.len() == 4);
    CHECK_THAT(error_of<ember::FormatError>([&] { ds.get(2); }), Catch::Contains("broken.png"));
    const auto gone = ImageFolderDataset::new_classification_with_items({{missing, "x"}}, {"x"});
    CHECK_THAT(error_of<ember::FormatError>([&] { gone.get(0); }),
               Catch::Contains(missing.string()));
}

namespace {

// A tiny fortune directory in the layout of Debian's, with the files it must skip.
struct FortuneTree {
    TempDir dir;
    FortuneTree() {
        const fs::path& r = dir.path;
        write_text(r / "animals", "The cat.\n%\nThe dog\nbarks.\n%\n");
        write_text(r / "zen", "%\nOne hand.\n%\n   \n%\nTwo\r\n%\r\nThree  \n");
        write_text(r / "zen.dat", "strfile index, not fortunes");
        fs::create_symlink(r / "zen", r / "zen.u8");
        fs::create_symlink(r / "animals", r / "beasts");  // an alias of a category
        write_text(r / ".hidden", "hidden\n%\n");
        write_text(r / "empty", "");
        fs::create_directories(r / "off");
        write_text(r / "off" / "rude", "offensive\n%\n");
    }
};

}  // namespace

TEST_CASE("FortunesDataset parses a fortune directory", "[datasets]") {
    FortuneTree tree;
    const FortunesDataset ds(tree.dir.path);
    CHECK(ds.categories() == std::vector<std::string>{"animals", "zen"});
    REQUIRE(ds.len() == 5);
    const std::vector<std::pair<std::string, std::size_t>> expected{
        {"The cat.", 0}, {"The dog\nbarks.", 0}, {"One hand.", 1}, {"Two", 1}, {"Three", 1}};
    for (std::size_t i = 0; i < expected.size(); ++i) {
        const auto item = ds.get(i);
        REQUIRE(item.has_value());
        CHECK(item->text == expected[i].first);
        CHECK(item->label == expected[i].second);
        CHECK(item->category == ds.categories()[expected[i].second]);
    }
    CHECK_FALSE(ds.get(5).has_value());
    CHECK(ds.corpus() == "The cat.\n\nThe dog\nbarks.\n\nOne hand.\n\nTwo\n\nThree");
    CHECK(ds.corpus("|") == "The cat.|The dog\nbarks.|One hand.|Two|Three");

    const auto zen = ds.filter_categories({"zen"});
    REQUIRE(zen.len() == 3);
    CHECK(zen.categories() == std::vector<std::string>{"zen"});
    CHECK(zen.get(0)->label == 0);
    CHECK_THROWS_AS(ds.filter_categories({"zen", "poetry"}), ember::ArgumentError);

    const auto short_ones = ds.filter([](const FortuneItem& f) { return f.text.size() <= 5; });
    REQUIRE(short_ones.len() == 2);
    CHECK(short_ones.get(1)->text == "Three");
    CHECK(short_ones.get(1)->label == 1);
    CHECK(short_ones.num_categories() == 2);
}

TEST_CASE("FortunesDataset splits deterministically by category", "[datasets]") {
    TempDir dir;
    std::string a, b;
    for (int i = 0; i < 10; ++i) a += "a" + std::to_string(i) + "\n%\n";
    for (int i = 0; i < 5; ++i) b += "b" + std::to_string(i) + "\n%\n";
    write_text(dir.path / "a", a);
    write_text(dir.path / "b", b);
    const FortunesDataset ds(dir.path);
    REQUIRE(ds.len() == 15);

    const auto texts = [](const FortunesDataset& d) {
        std::vector<std::string> t;
        for (std::size_t i = 0; i < d.len(); ++i) t.push_back(d.get(i)->text);
        return t;
    };
    const auto [train, test] = ds.split(0.8, 7);
    // round(0.8 * 10) = 8 and round(0.8 * 5) = 4 go to train.
    REQUIRE(train.len() == 12);
    REQUIRE(test.len() == 3);
    CHECK(train.categories() == ds.categories());
    std::size_t train_a = 0;
    for (const auto& t : texts(train)) train_a += t[0] == 'a';
    CHECK(train_a == 8);
    auto all = texts(train);
    const auto t = texts(test);
    all.insert(all.end(), t.begin(), t.end());
    std::sort(all.begin(), all.end());
    auto original = texts(ds);
    std::sort(original.begin(), original.end());
    CHECK(all == original);  // a partition
    const auto tr = texts(train);
    CHECK(std::is_sorted(tr.begin(), tr.end()));  // the original order is kept

    const auto [train2, test2] = ds.split(0.8, 7);
    CHECK(texts(test2) == texts(test));
    const auto [train3, test3] = ds.split(0.8, 8);
    CHECK(texts(test3) != texts(test));
    CHECK(ds.split(0.0, 1).first.len() == 0);
    CHECK(ds.split(1.0, 1).second.len() == 0);
    CHECK_THROWS_AS(ds.split(1.5, 1), ember::ArgumentError);
    CHECK_THROWS_AS(ds.split(-0.1, 1), ember::ArgumentError);
}

TEST_CASE("FortunesDataset locations and errors", "[datasets]") {
    FortuneTree tree;
    TempDir root;
    fs::create_directory_symlink(tree.dir.path, root.path / "fortunes");
    {
        ScopedEnv env("EMBER_DATA_DIR", root.path.string());
        const auto dirs = FortunesDataset::default_dirs();
        REQUIRE(dirs.size() == 2);
        CHECK(dirs[0] == root.path / "fortunes");
        CHECK(dirs[1] == fs::path("/usr/share/games/fortunes"));
        CHECK(FortunesDataset().len() == 5);
    }
    const fs::path missing = root.path / "missing";
    const std::string msg = error_of<ember::FormatError>([&] { FortunesDataset{missing}; });
    CHECK_THAT(msg, Catch::Contains(missing.string()));
    CHECK_THAT(msg, Catch::Contains("apt-get install fortunes"));
    TempDir empty;
    write_text(empty.path / "blank", "\n%\n\n");
    CHECK_THAT(error_of<ember::FormatError>([&] { FortunesDataset{empty.path}; }),
               Catch::Contains("no fortunes"));
}

TEST_CASE("CharTokenizer", "[datasets]") {
    const CharTokenizer tok("abca\n");
    CHECK(tok.vocab() == "\nabc");
    CHECK(tok.vocab_size() == 4);
    const auto ids = tok.encode("cab\n");
    CHECK(ids == std::vector<std::size_t>{3, 1, 2, 0});
    CHECK(tok.decode(ids) == "cab\n");
    CHECK_THAT(error_of<ember::ArgumentError>([&] { tok.encode("abd"); }),
               Catch::Contains("position 2"));
    const std::vector<std::size_t> bad{0, 4};
    CHECK_THROWS_AS(tok.decode(bad), ember::IndexError);
    CHECK_THROWS_AS(CharTokenizer(""), ember::ArgumentError);
}

TEST_CASE("FortunesDataset loads Debian's fortunes", "[datasets]") {
    const fs::path debian = FortunesDataset::debian_dir();
    if (!fs::exists(debian / "fortunes.dat")) {
        WARN("fortunes is not installed; skipping the real-data checks");
        return;
    }
    const FortunesDataset ds(debian);
    CHECK(std::is_sorted(ds.categories().begin(), ds.categories().end()));
    CHECK(std::count(ds.categories().begin(), ds.categories().end(), "computers") == 1);
    // strfile's index (NAME.dat) holds the number of fortunes of each file as a big-endian u32
    // after the version: an independent count to compare with.
    std::map<std::string, std::size_t> counts;
    for (std::size_t i = 0; i < ds.len(); ++i) ++counts[ds.get(i)->category];
    std::size_t total = 0;
    for (const std::string& c : ds.categories()) {
        INFO(c);
        CHECK(c.find('.') == std::string::npos);
        Bytes header(8);
        std::ifstream(debian / (c + ".dat"), std::ios::binary)
            .read(reinterpret_cast<char*>(header.data()), 8);
        const std::size_t numstr = (std::size_t{header[4]} << 24) | (std::size_t{header[5]} << 16) |
                                   (std::size_t{header[6]} << 8) | header[7];
        CHECK(counts[c] == numstr);
        total += numstr;
    }
    CHECK(ds.len() == total);
    const std::string corpus = ds.corpus();
    const CharTokenizer tok(corpus);
    CHECK(tok.decode(tok.encode(corpus)) == corpus);
    const auto [train, test] = ds.split(0.9, 42);
    CHECK(train.len() + test.len() == ds.len());
}

}  // namespace test_datasets_builtin
