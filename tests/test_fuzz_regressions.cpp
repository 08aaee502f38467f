// The fuzz targets (tests/fuzz/fuzz_*.cpp, built into this binary with EMBER_FUZZ_REPLAY) replay
// every committed seed and every reproducer of a past finding through the normal build, so that a
// fixed bug stays fixed where no fuzzer runs; and each finding has a test of its own, named after
// the attack, that checks the refusal and its message.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zlib.h>

#include <ember/collective/rendezvous.hpp>
#include <ember/data/vision.hpp>
#include <ember/module/config.hpp>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <thread>

#include "fuzz/fuzz.hpp"
#include "harness.hpp"

namespace test_fuzz_regressions {

namespace {

namespace fs = std::filesystem;

std::vector<std::byte> read_all(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::vector<char> raw((std::istreambuf_iterator<char>(in)), {});
    std::vector<std::byte> out(raw.size());
    std::memcpy(out.data(), raw.data(), raw.size());
    return out;
}

const fs::path kFuzzDir = fs::path(EMBER_SOURCE_DIR) / "tests" / "fuzz";

}  // namespace

TEST_CASE("fuzz targets: every seed and reproducer replays without a crash", "[fuzz]") {
    const auto& targets = ember::fuzz::registry();
    REQUIRE(targets.size() >= 14);
    for (const auto& [name, target] : targets) {
        DYNAMIC_SECTION(name) {
            std::size_t seeds = 0;
            for (const char* kind : {"corpus", "crashes"}) {
                const fs::path dir = kFuzzDir / kind / name;
                if (!fs::is_directory(dir)) continue;
                for (const auto& e : fs::directory_iterator(dir)) {
                    if (!e.is_regular_file() || e.path().filename() == ".keep") continue;
                    INFO(e.path().string());
                    // A target swallows the ember::Error that refuses a bad input; anything else
                    // (another exception, a failed check of the harness) escapes here.
                    CHECK_NOTHROW(target(read_all(e.path())));
                    seeds += std::string_view(kind) == "corpus";
                }
            }
            CHECK(seeds >= 1);  // every target has a corpus to start from
        }
    }
}

TEST_CASE("fuzz targets: every corpus and reproducer directory belongs to a target", "[fuzz]") {
    // A renamed or removed target must not leave seeds or reproducers that nothing replays.
    std::set<std::string> names;
    for (const auto& [name, target] : ember::fuzz::registry()) names.insert(name);
    names.insert("onnx");  // built into this binary only with the ONNX importer (EMBER_ONNX)
    for (const char* kind : {"corpus", "crashes"})
        for (const auto& e : fs::directory_iterator(kFuzzDir / kind)) {
            INFO(e.path().string());
            CHECK(names.count(e.path().filename().string()) == 1);
        }
}

// ---- findings -----------------------------------------------------------------------------

TEST_CASE("rendezvous: a rank 0 that announces 4 GiB is refused before allocating",
          "[fuzz][collective][rendezvous]") {
    // A fake rank 0 on loopback answers the hello with status 0 and a length of 2^32 - 1
    // (tests/fuzz/crashes/rendezvous/rank0-announces-4gib made the rank allocate 4 GiB).
    const int listener = ::socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(listener >= 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    REQUIRE(::bind(listener, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    REQUIRE(::listen(listener, 4) == 0);
    REQUIRE(::getsockname(listener, reinterpret_cast<sockaddr*>(&a), &len) == 0);
    std::thread rank0([&] {
        const int c = ::accept(listener, nullptr, nullptr);
        if (c < 0) return;
        char hello[16];
        std::size_t got = 0;
        while (got < sizeof hello) {
            const ssize_t k = ::recv(c, hello + got, sizeof hello - got, 0);
            if (k <= 0) break;
            got += std::size_t(k);
        }
        const unsigned char reply[8] = {0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff};
        (void)::send(c, reply, sizeof reply, MSG_NOSIGNAL);
        char byte;
        (void)::recv(c, &byte, 1, 0);  // until the rank hangs up
        ::close(c);
    });
    const std::string address = "127.0.0.1:" + std::to_string(ntohs(a.sin_port));
    CHECK_THROWS_WITH(
        ember::collective::tcp_rendezvous_fetch(address, 1, 2, std::chrono::seconds(10)),
        Catch::Contains("announces 4294967295 bytes, more than the 1048576"));
    rank0.join();
    ::close(listener);
}

TEST_CASE("rendezvous: more than 1 MiB is refused on both sides and in files",
          "[fuzz][collective][rendezvous]") {
    using namespace ember::collective;
    const std::vector<std::byte> big((std::size_t{1} << 20) + 1, std::byte{7});
    TcpRendezvousServer server(0);
    CHECK_THROWS_WITH(server.serve(big, 2, std::chrono::milliseconds(10)),
                      Catch::Contains("1048577 bytes, more than the 1048576"));
    const fs::path file =
        fs::temp_directory_path() / ("ember-rdv-big-" + std::to_string(::getpid()));
    {
        std::ofstream out(file, std::ios::binary);
        out.write(reinterpret_cast<const char*>(big.data()), std::streamsize(big.size()));
    }
    CHECK_THROWS_WITH(wait_rendezvous_file(file, std::chrono::seconds(1)),
                      Catch::Contains("more than the 1048576 bytes"));
    // At the limit it is still read whole.
    fs::resize_file(file, std::size_t{1} << 20);
    CHECK(wait_rendezvous_file(file, std::chrono::seconds(1)).size() == std::size_t{1} << 20);
    fs::remove(file);
}

namespace {

// The reproducer's bytes without the fuzz target's first (mode) byte, written to a temporary
// file named `name`.
fs::path image_file(const std::string& reproducer, const std::string& name) {
    const auto bytes = read_all(kFuzzDir / "crashes" / "image" / reproducer);
    const fs::path file =
        fs::temp_directory_path() / ("ember-fuzz-" + std::to_string(::getpid()) + "-" + name);
    std::ofstream out(file, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()) + 1, std::streamsize(bytes.size() - 1));
    return file;
}

}  // namespace

TEST_CASE("images: a JPEG with a Huffman table of more than 256 codes is refused", "[fuzz][data]") {
    // stb_image 2.27 stores such a table past the end of its arrays (a heap overflow).
    // (The third reached stb through stbi_info, which parses the tables too.)
    for (const char* r : {"jpeg-huffman-over-256-codes", "jpeg-huffman-over-256-codes-2",
                          "jpeg-huffman-overflow-in-stbi-info", "jpeg-huffman-after-fill-bytes"}) {
        const fs::path file = image_file(r, "huffman.jpg");
        const auto ds =
            ember::data::ImageFolderDataset::new_classification_with_items({{file, "a"}}, {"a"});
        CHECK_THROWS_WITH(ds.get(0), Catch::Contains(file.string()) &&
                                         Catch::Contains("Huffman table of more than 256 codes"));
        fs::remove(file);
    }
}

namespace {

// A PNG of one row of grey 8-bit pixels `px` (filter 0, zlib's compress), with an empty IDAT
// chunk before the one holding the data when `empty_first`.
std::vector<unsigned char> grey_row_png(const std::vector<unsigned char>& px, bool empty_first) {
    std::vector<unsigned char> out = {137, 80, 78, 71, 13, 10, 26, 10};
    const auto be32 = [&](std::uint32_t v) {
        for (int shift = 24; shift >= 0; shift -= 8) out.push_back((v >> shift) & 255);
    };
    const auto chunk = [&](const char* type, const std::vector<unsigned char>& data) {
        be32(std::uint32_t(data.size()));
        std::vector<unsigned char> body(type, type + 4);
        body.insert(body.end(), data.begin(), data.end());
        out.insert(out.end(), body.begin(), body.end());
        be32(std::uint32_t(crc32(0, body.data(), uInt(body.size()))));
    };
    chunk("IHDR", {0, 0, 0, static_cast<unsigned char>(px.size()), 0, 0, 0, 1, 8, 0, 0, 0, 0});
    std::vector<unsigned char> raw = {0};
    raw.insert(raw.end(), px.begin(), px.end());
    uLongf length = compressBound(uLong(raw.size()));
    std::vector<unsigned char> z(length);
    REQUIRE(compress(z.data(), &length, raw.data(), uLong(raw.size())) == Z_OK);
    z.resize(length);
    if (empty_first) chunk("IDAT", {});
    chunk("IDAT", z);
    chunk("IEND", {});
    return out;
}

}  // namespace

TEST_CASE("images: a PNG whose first IDAT chunk is empty loads as without it", "[fuzz][data]") {
    // stb_image 2.27 copied an empty first IDAT into its not yet allocated buffer (memcpy to a
    // null pointer; tests/fuzz/crashes/image/png-empty-first-idat-memcpy-null): ember drops
    // empty IDAT chunks before stb reads the file.
    const std::vector<unsigned char> px = {0, 17, 128, 255, 3};
    for (const bool empty_first : {false, true}) {
        INFO("empty first IDAT: " << empty_first);
        const auto png = grey_row_png(px, empty_first);
        const fs::path file = fs::temp_directory_path() /
                              ("ember-fuzz-" + std::to_string(::getpid()) + "-empty-idat.png");
        std::ofstream(file, std::ios::binary)
            .write(reinterpret_cast<const char*>(png.data()), std::streamsize(png.size()));
        const auto ds =
            ember::data::ImageFolderDataset::new_classification_with_items({{file, "a"}}, {"a"});
        const auto item = ds.get(0);
        REQUIRE(item.has_value());
        CHECK(item->image.shape() == ember::Shape{1, px.size(), 1});
        const auto bytes = item->image.bytes();
        CHECK(std::vector<unsigned char>(reinterpret_cast<const unsigned char*>(bytes.data()),
                                         reinterpret_cast<const unsigned char*>(bytes.data()) +
                                             bytes.size()) == px);
        fs::remove(file);
    }
    // The reproducer itself (its data is corrupt past the empty chunk) is refused cleanly.
    const fs::path file = image_file("png-empty-first-idat-memcpy-null", "empty-idat.png");
    const auto ds =
        ember::data::ImageFolderDataset::new_classification_with_items({{file, "a"}}, {"a"});
    CHECK_THROWS_AS(ds.get(0), ember::FormatError);
    fs::remove(file);
}

TEST_CASE("images: an image without pixels loads as an empty tensor", "[fuzz][data]") {
    // A PGM whose width is not a number: stb_image reads a 0x0 image, whose pixel copy used to
    // pass a null pointer to memcpy.
    const fs::path file = image_file("empty-image-memcpy-null", "empty.pgm");
    const auto ds =
        ember::data::ImageFolderDataset::new_classification_with_items({{file, "a"}}, {"a"});
    const auto item = ds.get(0);
    REQUIRE(item.has_value());
    CHECK(item->image.num_elements() == 0);
    CHECK(item->image.shape().rank() == 3);
    fs::remove(file);
}

TEST_CASE("config: a number beyond a double's range is a FormatError", "[fuzz][config]") {
    // nlohmann::json reports it as out_of_range, not parse_error, and it escaped as a foreign
    // exception (tests/fuzz/crashes/config/number-out-of-range).
    for (const char* text : {R"({"d_model": 1e999})", R"({"a": [-1e400]})"})
        CHECK_THROWS_WITH(
            ember::config::detail::value_from_json(text, "fuzz.json"),
            Catch::Contains("fuzz.json: not valid JSON") && Catch::Contains("number overflow"));
}

TEST_CASE("images: a GIF announcing a canvas of gigabytes is refused before decoding",
          "[fuzz][data]") {
    // 67 bytes announce 18176x17993 pixels, which stb_image allocated (1.3 GB, then more).
    const fs::path file = image_file("gif-canvas-of-1.3gb", "canvas.gif");
    const auto ds =
        ember::data::ImageFolderDataset::new_classification_with_items({{file, "a"}}, {"a"});
    CHECK_THROWS_WITH(ds.get(0), Catch::Contains(file.string()) &&
                                     Catch::Contains("the image's pixels would take "
                                                     "1308163072 bytes from 67 stored"));
    fs::remove(file);
}

TEST_CASE("images: a PNG chunk longer than the file is refused before decoding", "[fuzz][data]") {
    // 120 bytes whose second IDAT chunk claims 1.3 GB: stb_image grew its buffer to 2 GiB before
    // finding the data missing (a 10-minute fuzz run of the image target, 2026-11-28).
    const fs::path file = image_file("png-idat-chunk-claims-1.3gb", "chunk.png");
    const auto ds =
        ember::data::ImageFolderDataset::new_classification_with_items({{file, "a"}}, {"a"});
    CHECK_THROWS_AS(ds.get(0), ember::FormatError);
    CHECK_THROWS_WITH(ds.get(0), Catch::Contains(file.string()) &&
                                     Catch::Contains("corrupt PNG: an IDAT chunk longer than"));
    fs::remove(file);
}

TEST_CASE("images: a PGM header number beyond an int, or 16-bit samples, is refused",
          "[fuzz][data]") {
    // stb_image 2.27 overflows an int reading the first (undefined behaviour) and reads past its
    // buffer converting the second to the channels asked for.
    for (const char* r : {"pgm-width-overflows-int", "pgm-16-bit-samples-to-2-channels"}) {
        const fs::path file = image_file(r, "bad.pgm");
        const auto ds =
            ember::data::ImageFolderDataset::new_classification_with_items({{file, "a"}}, {"a"})
                .with_channels(2);
        CHECK_THROWS_WITH(ds.get(0), Catch::Contains(file.string()) &&
                                         Catch::Contains("PGM/PPM: a header number beyond"));
        fs::remove(file);
    }
}

}  // namespace test_fuzz_regressions
