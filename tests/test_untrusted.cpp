// Hostile files (issue 34, items 4 and 7): decompression bombs and oversized reads refused
// before allocating, paths that are not regular files refused without blocking, gzip streams
// cut before their trailer, NamedMpk's checksum, and bytes from a file escaped in messages.
// Every hostile file is made here, small; the limits, not the machine, stop them.
#include <fcntl.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <cstring>
#include <ember/data/dataset.hpp>
#include <ember/data/sqlite.hpp>
#include <ember/data/vision.hpp>
#include <ember/record.hpp>
#include <ember/record/pytorch.hpp>
#include <ember/record/safetensors.hpp>
#include <filesystem>
#include <fstream>
#include <thread>

#include "harness.hpp"

namespace test_untrusted {

namespace {

namespace fs = std::filesystem;
namespace rec = ember::record;

struct TempDir {
    fs::path path;
    explicit TempDir(const std::string& name)
        : path(fs::temp_directory_path() /
               ("ember-untrusted-" + name + "-" + std::to_string(::getpid()))) {
        fs::remove_all(path);
        fs::create_directories(path);
    }
    ~TempDir() { fs::remove_all(path); }
};

void write_file(const fs::path& p, const std::vector<std::uint8_t>& bytes) {
    std::ofstream out(p, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
}

std::vector<std::uint8_t> read_file(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// A raw deflate segment of `n` zero bytes ending in a full flush: byte-aligned and independent
// of what came before, so k copies in a row are a valid stream of k·n zeros.
std::vector<std::uint8_t> zero_segment(std::size_t n) {
    z_stream z{};
    REQUIRE(deflateInit2(&z, 9, Z_DEFLATED, -15, 9, Z_DEFAULT_STRATEGY) == Z_OK);
    std::vector<std::uint8_t> in(n, 0), out(n + 1024);
    z.next_in = in.data();
    z.avail_in = static_cast<uInt>(n);
    z.next_out = out.data();
    z.avail_out = static_cast<uInt>(out.size());
    REQUIRE(deflate(&z, Z_FULL_FLUSH) == Z_OK);
    out.resize(out.size() - z.avail_out);
    deflateEnd(&z);
    return out;
}

// A gzip member: `prefix` (stored, so its bytes come first), then `copies` segments of
// `segment_bytes` zeros, then the final block and a trailer (whose CRC only a reader that gets
// that far would check).
std::vector<std::uint8_t> gzip_bomb(const std::vector<std::uint8_t>& prefix, std::size_t copies,
                                    std::size_t segment_bytes = std::size_t{1} << 20) {
    std::vector<std::uint8_t> out = {0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff};
    if (!prefix.empty()) {  // a stored block (type 00), not final
        out.push_back(0);
        const auto n = static_cast<std::uint16_t>(prefix.size());
        out.push_back(n & 0xff), out.push_back(n >> 8);
        out.push_back(~n & 0xff), out.push_back((~n >> 8) & 0xff);
        out.insert(out.end(), prefix.begin(), prefix.end());
    }
    const auto seg = zero_segment(segment_bytes);
    for (std::size_t i = 0; i < copies; ++i) out.insert(out.end(), seg.begin(), seg.end());
    out.insert(out.end(), {0x03, 0x00});  // a final fixed-Huffman block holding only its end
    for (int i = 0; i < 8; ++i) out.push_back(0);
    return out;
}

std::vector<std::uint8_t> gzip_bytes(const std::vector<std::uint8_t>& data) {
    std::vector<std::byte> in(data.size());
    std::memcpy(in.data(), data.data(), data.size());
    z_stream z{};
    REQUIRE(deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) == Z_OK);
    std::vector<std::uint8_t> out(deflateBound(&z, uLong(data.size())) + 64);
    z.next_in = const_cast<Bytef*>(data.data());
    z.avail_in = uInt(data.size());
    z.next_out = out.data();
    z.avail_out = uInt(out.size());
    REQUIRE(deflate(&z, Z_FINISH) == Z_STREAM_END);
    out.resize(out.size() - z.avail_out);
    deflateEnd(&z);
    return out;
}

// An IDX header of unsigned bytes in `dims`.
std::vector<std::uint8_t> idx_header(const std::vector<std::uint32_t>& dims) {
    std::vector<std::uint8_t> h = {0, 0, 8, std::uint8_t(dims.size())};
    for (auto d : dims)
        h.insert(h.end(), {std::uint8_t(d >> 24), std::uint8_t(d >> 16), std::uint8_t(d >> 8),
                           std::uint8_t(d)});
    return h;
}

std::string message_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const ember::FormatError& e) {
        return e.what();
    }
    FAIL("no FormatError");
    return {};
}

std::string argument_message_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const ember::ArgumentError& e) {
        return e.what();
    }
    FAIL("no ArgumentError");
    return {};
}

rec::Value small_tree() {
    rec::Map m;
    m.emplace_back("weight", rec::Value(ember::TensorData(std::vector<float>{1, 2, 3, 4}, {2, 2})));
    m.emplace_back("step", rec::Value(std::int64_t{7}));
    return rec::Value(std::move(m));
}

}  // namespace

// ---- item 4: decompression and read limits ------------------------------------------------

TEST_CASE("attack: a 3 MB .mpk.gz that inflates to 3 GB is refused at the limit", "[untrusted][hostile]") {
    TempDir dir("mpkgz");
    // 3000 segments of 1 MiB of zeros: ~3 MB on disk, 3 GiB inflated.
    const auto bomb = gzip_bomb({0x85}, 3000);
    CHECK(bomb.size() < std::size_t{4} << 20);
    write_file(dir.path / "model.mpk.gz", bomb);
    // Limits small enough that no test allocates much: decoding stops at 4 MiB (the floor),
    // whatever the stream goes on to claim.
    rec::ReadLimits l;
    l.expansion_floor = std::size_t{4} << 20;
    l.max_expansion = 1;
    const rec::ScopedReadLimits scoped(l);
    const std::string m =
        message_of([&] { (void)rec::NamedMpkGzFileRecorder<>{}.load(dir.path / "model"); });
    CHECK_THAT(m, Catch::Contains("model.mpk.gz") && Catch::Contains("decompresses to more than") &&
                      Catch::Contains("EMBER_MAX_EXPANSION"));
    // The absolute cap says so when it is the one that bites.
    l.max_expansion = 1000;
    l.max_bytes = std::size_t{2} << 20;
    const rec::ScopedReadLimits tighter(l);
    CHECK_THAT(message_of([&] { (void)rec::NamedMpkGzFileRecorder<>{}.load(dir.path / "model"); }),
               Catch::Contains("EMBER_MAX_READ_BYTES"));
}

TEST_CASE("attack: an .mpk.gz inflating past the defaults is refused, real ones load",
          "[untrusted][hostile]") {
    TempDir dir("mpkgz-default");
    // A gzipped record under the limits loads (zeros compress ~1000:1, below the 256 MiB floor).
    rec::Map m;
    m.emplace_back("zeros",
                   rec::Value(ember::TensorData(std::vector<float>(1 << 20, 0.f), {1 << 20})));
    const rec::Value tree(std::move(m));
    rec::NamedMpkGzFileRecorder<>{}.record(tree, dir.path / "ok");
    CHECK(rec::NamedMpkGzFileRecorder<>{}.load(dir.path / "ok") == tree);
    // The defaults: 64:1 above 256 MiB. A 40 KB stream claiming 40 GiB stops at the floor;
    // run with a lowered floor to stay small, the default ratio unchanged.
    rec::ReadLimits l;
    CHECK(l.max_expansion == 64);
    CHECK(l.expansion_floor == std::uint64_t{256} << 20);
    CHECK(l.max_bytes == std::uint64_t{16} << 30);
    CHECK(l.max_decoded(1000) == l.expansion_floor);
    CHECK(l.max_decoded(std::uint64_t{1} << 30) == l.max_bytes);  // 64 GiB capped at 16
    l.expansion_floor = 1 << 20;
    const rec::ScopedReadLimits scoped(l);
    write_file(dir.path / "bomb.mpk.gz", gzip_bomb({0x85}, 40));  // 40 MiB from ~40 KB
    CHECK_THAT(message_of([&] { (void)rec::NamedMpkGzFileRecorder<>{}.load(dir.path / "bomb"); }),
               Catch::Contains("decompresses to more than"));
}

TEST_CASE("attack: a 3 MB gzipped IDX file announcing 4.4 GB is refused before reading",
          "[untrusted][hostile]") {
    TempDir dir("idx");
    // The header announces 4.4 GB of images; the file is a few KB. Default limits: refused from
    // the header, before a byte of pixels is inflated or allocated.
    const auto header = idx_header({5'600'000, 28, 28});
    write_file(dir.path / "train-images-idx3-ubyte.gz", gzip_bomb(header, 3));
    const std::string m = message_of([&] {
        (void)ember::data::detail::read_idx_u8(dir.path / "train-images-idx3-ubyte.gz", 3);
    });
    CHECK_THAT(m, Catch::Contains("train-images-idx3-ubyte.gz") && Catch::Contains("4390400016") &&
                      Catch::Contains("EMBER_MAX_EXPANSION"));
    // A plain IDX file must hold what its header announces: checked before allocating too.
    write_file(dir.path / "plain-idx3-ubyte", header);
    CHECK_THAT(message_of([&] {
                   (void)ember::data::detail::read_idx_u8(dir.path / "plain-idx3-ubyte", 3);
               }),
               Catch::Contains("is truncated") && Catch::Contains("4390400000 bytes"));
}

TEST_CASE("attack: a gzipped IDX file missing its trailer fails its CRC/length check",
          "[untrusted][hostile]") {
    TempDir dir("idx-trailer");
    std::vector<std::uint8_t> idx = idx_header({3});
    idx.insert(idx.end(), {1, 2, 3});
    const auto gz = gzip_bytes(idx);
    write_file(dir.path / "ok-idx1-ubyte.gz", gz);
    const auto ok = ember::data::detail::read_idx_u8(dir.path / "ok-idx1-ubyte.gz", 1);
    CHECK(ok.values == std::vector<std::uint8_t>{1, 2, 3});
    // The same stream without its 8-byte trailer (CRC-32 and length): every data byte is there,
    // which is why zlib's gzread alone does not complain.
    write_file(dir.path / "cut-idx1-ubyte.gz", {gz.begin(), gz.end() - 8});
    CHECK_THAT(message_of([&] {
                   (void)ember::data::detail::read_idx_u8(dir.path / "cut-idx1-ubyte.gz", 1);
               }),
               Catch::Contains("cut-idx1-ubyte.gz") && Catch::Contains("trailer"));
    // A wrong CRC is an error too.
    auto bad = gz;
    bad[bad.size() - 8] ^= 0xff;
    write_file(dir.path / "crc-idx1-ubyte.gz", bad);
    CHECK_THROWS_AS(ember::data::detail::read_idx_u8(dir.path / "crc-idx1-ubyte.gz", 1),
                    ember::FormatError);
}

TEST_CASE("attack: a record file larger than the read limit is refused before reading",
          "[untrusted][hostile]") {
    TempDir dir("big");
    rec::NamedMpkFileRecorder<>{}.record(small_tree(), dir.path / "m");
    rec::ReadLimits l;
    l.max_bytes = 16;
    const rec::ScopedReadLimits scoped(l);
    CHECK_THAT(message_of([&] { (void)rec::NamedMpkFileRecorder<>{}.load(dir.path / "m"); }),
               Catch::Contains("m.mpk") && Catch::Contains("more than the read limit of 16"));
}

TEST_CASE("read limits: the arithmetic and set_read_limits", "[untrusted][hostile]") {
    rec::ReadLimits l;
    l.max_bytes = 100;
    l.expansion_floor = 10;
    l.max_expansion = 4;
    CHECK(l.max_decoded(1) == 10);
    CHECK(l.max_decoded(5) == 20);
    CHECK(l.max_decoded(1000) == 100);
    CHECK(l.max_decoded(~std::uint64_t{0}) == 100);  // no overflow
    const rec::ScopedReadLimits scoped(l);
    CHECK(rec::read_limits().max_bytes == 100);
}

TEST_CASE("read limits come from the environment", "[untrusted][hostile]") {
    struct Env {
        const char* name;
        Env(const char* n, const char* v) : name(n) { ::setenv(n, v, 1); }
        ~Env() { ::unsetenv(name); }
    };
    {
        const Env a("EMBER_MAX_READ_BYTES", "2G"), b("EMBER_MAX_EXPANSION", "8"),
            c("EMBER_EXPANSION_FLOOR", "512k"), d("EMBER_VERIFY_CHECKSUMS", "0");
        const rec::ReadLimits l = rec::detail::read_limits_from_environment();
        CHECK(l.max_bytes == std::uint64_t{2} << 30);
        CHECK(l.max_expansion == 8);
        CHECK(l.expansion_floor == 512 * 1024);
        CHECK_FALSE(l.verify_checksums);
    }
    const rec::ReadLimits defaults = rec::detail::read_limits_from_environment();
    CHECK(defaults.max_bytes == std::uint64_t{16} << 30);
    CHECK(defaults.verify_checksums);
    for (const char* bad : {"lots", "-1", "12Q", "99999999999999999999"}) {
        const Env e("EMBER_MAX_READ_BYTES", bad);
        CHECK_THROWS_AS(rec::detail::read_limits_from_environment(), ember::ArgumentError);
    }
    const Env e("EMBER_VERIFY_CHECKSUMS", "no");
    CHECK_THROWS_WITH(rec::detail::read_limits_from_environment(),
                      Catch::Contains("EMBER_VERIFY_CHECKSUMS='no' must be 0 or 1"));
}

// ---- item 4: regular files only -------------------------------------------------------------

TEST_CASE("attack: a record path naming /dev/zero is refused, not read until memory runs out",
          "[untrusted][hostile]") {
    CHECK_THAT(
        message_of([] { (void)rec::detail::read_file("/dev/zero", rec::detail::Format::Bin); }),
        Catch::Contains("/dev/zero: is a character device, not a regular file"));
    CHECK_THAT(message_of([] { (void)rec::load_safetensors("/dev/zero"); }),
               Catch::Contains("not a regular file"));
    CHECK_THAT(message_of([] { (void)rec::read_pytorch_tensors("/dev/zero"); }),
               Catch::Contains("not a regular file"));
    CHECK_THAT(message_of([] { (void)ember::data::detail::read_idx_u8("/dev/zero", 1); }),
               Catch::Contains("not a regular file"));
}

TEST_CASE("attack: a record path naming a FIFO is refused without blocking", "[untrusted][hostile]") {
    TempDir dir("fifo");
    const fs::path fifo = dir.path / "model.mpk";
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    // No writer ever opens it: a blocking open would hang this test forever.
    CHECK_THAT(message_of([&] { (void)rec::NamedMpkFileRecorder<>{}.load(dir.path / "model"); }),
               Catch::Contains("model.mpk: is a FIFO, not a regular file"));
    const fs::path csv = dir.path / "data.csv";
    REQUIRE(::mkfifo(csv.c_str(), 0600) == 0);
    CHECK_THAT(message_of([&] { (void)ember::data::detail::read_csv(csv, {}); }),
               Catch::Contains("is a FIFO"));
    const fs::path idx = dir.path / "t10k-labels-idx1-ubyte";
    REQUIRE(::mkfifo(idx.c_str(), 0600) == 0);
    CHECK_THAT(message_of([&] { (void)ember::data::detail::read_idx_u8(idx, 1); }),
               Catch::Contains("is a FIFO"));
}

TEST_CASE("attack: a record path naming a directory is refused with a clear error", "[untrusted][hostile]") {
    TempDir dir("dir");
    fs::create_directories(dir.path / "model.mpk");
    CHECK_THAT(message_of([&] { (void)rec::NamedMpkFileRecorder<>{}.load(dir.path / "model"); }),
               Catch::Contains("model.mpk: is a directory"));
    CHECK_THAT(message_of([&] { (void)rec::NamedMpkFileRecorder<>{}.load(dir.path / "absent"); }),
               Catch::Contains("absent.mpk: no such file"));
}

// ---- item 7: NamedMpk's checksum ------------------------------------------------------------

TEST_CASE("attack: a flipped byte in a NamedMpk model fails its checksum", "[untrusted][hostile]") {
    TempDir dir("mpk-crc");
    const rec::NamedMpkFileRecorder<> r;
    r.record(small_tree(), dir.path / "m");
    auto bytes = read_file(dir.path / "m.mpk");
    // The file ends with the checksum entry: "crc32" (fixstr), 0xce and four bytes.
    REQUIRE(bytes.size() > 11);
    const std::vector<std::uint8_t> tail(bytes.end() - 11, bytes.end() - 4);
    CHECK(tail == std::vector<std::uint8_t>{0xa5, 'c', 'r', 'c', '3', '2', 0xce});
    CHECK(r.load(dir.path / "m") == small_tree());
    // Flip one bit of the tensor's elements (1.0f = 00 00 80 3f, little-endian): the structure
    // stays valid, so only the checksum can tell.
    const std::vector<std::uint8_t> one = {0x00, 0x00, 0x80, 0x3f};
    auto at = std::search(bytes.begin(), bytes.end(), one.begin(), one.end());
    REQUIRE(at != bytes.end());
    at[2] ^= 0x01;
    write_file(dir.path / "m.mpk", bytes);
    CHECK_THAT(message_of([&] { (void)r.load(dir.path / "m"); }),
               Catch::Contains("m.mpk") && Catch::Contains("checksum mismatch"));
    // Skipping the check is possible (and loads the changed value).
    rec::ReadLimits l;
    l.verify_checksums = false;
    {
        const rec::ScopedReadLimits skip(l);
        const rec::Value v = r.load(dir.path / "m");
        CHECK_FALSE(v == small_tree());
    }
    // The Bin format's checksum obeys the same switch.
    const rec::BinFileRecorder<> bin;
    bin.record(small_tree(), dir.path / "b");
    auto b = read_file(dir.path / "b.bin");
    auto bat = std::search(b.begin(), b.end(), one.begin(), one.end());
    REQUIRE(bat != b.end());
    bat[2] ^= 0x01;
    write_file(dir.path / "b.bin", b);
    CHECK_THAT(message_of([&] { (void)bin.load(dir.path / "b"); }),
               Catch::Contains("checksum mismatch"));
    const rec::ScopedReadLimits skip(l);
    CHECK_NOTHROW(bin.load(dir.path / "b"));
}

TEST_CASE("NamedMpk files written before the checksum still load", "[untrusted][hostile]") {
    TempDir dir("mpk-old");
    // An old file: the envelope of four entries, no checksum, byte for byte as ember wrote it
    // ({"ember_record": 1, "float": "f32", "int": "i32", "item": {"step": 7}}).
    std::vector<std::uint8_t> old = {0x84, 0xac};
    for (char c : std::string("ember_record")) old.push_back(std::uint8_t(c));
    old.push_back(0x01);
    old.push_back(0xa5);
    for (char c : std::string("float")) old.push_back(std::uint8_t(c));
    old.insert(old.end(), {0xa3, 'f', '3', '2', 0xa3, 'i',  'n',  't', 0xa3, 'i', '3', '2',
                           0xa4, 'i', 't', 'e', 'm',  0x81, 0xa4, 's', 't',  'e', 'p', 0x07});
    write_file(dir.path / "old.mpk", old);
    const rec::Value v = rec::NamedMpkFileRecorder<>{}.load(dir.path / "old");
    CHECK(v.at("step").as<std::int64_t>() == 7);
    // A checksum entry anywhere but last, or of another form, is refused.
    auto moved = old;
    moved[0] = 0x85;
    moved.insert(moved.end(), {0xa5, 'c', 'r', 'c', '3', '2', 0x07});
    write_file(dir.path / "odd.mpk", moved);
    CHECK_THAT(message_of([&] { (void)rec::NamedMpkFileRecorder<>{}.load(dir.path / "odd"); }),
               Catch::Contains("'crc32' entry is not the envelope's last"));
}

// ---- item 7: bytes from a file escaped in messages --------------------------------------------

TEST_CASE("printable escapes what a hostile file could put in a message", "[untrusted][hostile]") {
    CHECK(rec::printable("plain name.weight") == "plain name.weight");
    CHECK(rec::printable("a\nb\tc\\") == "a\\nb\\tc\\\\");
    CHECK(rec::printable("\x1b[2J\x07") == "\\x1b[2J\\x07");
    CHECK(rec::printable("caf\xc3\xa9") == "caf\xc3\xa9");  // valid UTF-8 stays
    CHECK(rec::printable("\xc2\x9b"
                         "31m") == "\\xc2\\x9b31m");    // a C1 control (CSI) does not
    CHECK(rec::printable("\xff\xfe") == "\\xff\\xfe");  // invalid UTF-8
    CHECK(rec::printable(std::string(300, 'x'), 10) == "xxxxxxxxxx...");
}

TEST_CASE("attack: a tensor name with terminal escapes is escaped in the error", "[untrusted][hostile]") {
    // safetensors: a dtype ember lacks, on a tensor named with an escape sequence and a newline.
    const std::string header =
        "{\"evil\\u001b]0;pwned\\u0007\\nline\":{\"dtype\":\"U32\",\"shape\":[1],\"data_offsets\":["
        "0,4]}}";
    std::vector<std::byte> bytes(8 + header.size() + 4);
    const std::uint64_t n = header.size();
    std::memcpy(bytes.data(), &n, 8);
    std::memcpy(bytes.data() + 8, header.data(), header.size());
    const std::string m =
        message_of([&] { (void)rec::decode_safetensors(bytes, "x.safetensors"); });
    CHECK_THAT(m, Catch::Contains("evil\\x1b]0;pwned\\x07\\nline"));
    CHECK(m.find('\x1b') == std::string::npos);
    CHECK(m.find('\n') == std::string::npos);
    // NamedMpk: an unknown dtype string with control bytes.
    rec::NamedMpkFileRecorder<> r;
    TempDir dir("escape");
    r.record(small_tree(), dir.path / "m");
    auto b = read_file(dir.path / "m.mpk");
    const std::vector<std::uint8_t> f32 = {0xa3, 'f', '3', '2', 0xa5, 's'};  // the tensor's dtype
    auto at = std::search(b.begin(), b.end(), f32.begin(), f32.end());
    REQUIRE(at != b.end());
    at[1] = 0x1b, at[2] = '\n';
    write_file(dir.path / "m.mpk", b);
    const std::string m2 = message_of([&] { (void)r.load(dir.path / "m"); });
    CHECK_THAT(m2, Catch::Contains("unknown dtype '\\x1b\\n2'"));
}

TEST_CASE("attack: duplicate safetensors keys are refused", "[untrusted][hostile]") {
    auto file = [](const std::string& header, std::size_t body) {
        std::vector<std::byte> bytes(8 + header.size() + body);
        const std::uint64_t n = header.size();
        std::memcpy(bytes.data(), &n, 8);
        std::memcpy(bytes.data() + 8, header.data(), header.size());
        return bytes;
    };
    const std::string t = "{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}";
    // Two tensors of one name: which one a reader keeps is undefined.
    CHECK_THAT(message_of([&] {
                   (void)rec::decode_safetensors(file("{\"w\":" + t + ",\"w\":" + t + "}", 4), "d");
               }),
               Catch::Contains("names 'w' twice"));
    // A field given twice inside a tensor's entry too.
    CHECK_THAT(message_of([&] {
                   (void)rec::decode_safetensors(
                       file("{\"w\":{\"dtype\":\"F32\",\"dtype\":\"F64\",\"shape\":[1],"
                            "\"data_offsets\":[0,4]}}",
                            4),
                       "d");
               }),
               Catch::Contains("names 'dtype' twice"));
    CHECK_NOTHROW(rec::decode_safetensors(file("{\"w\":" + t + "}", 4), "d"));
}

TEST_CASE("attack: a 33-byte PNG announcing 1 GB of pixels is refused before decoding",
          "[untrusted][hostile]") {
    TempDir dir("png");
    fs::create_directories(dir.path / "cat");
    // The PNG signature and an IHDR of 16000 x 16000 RGB (below stb_image's own 1 GiB cap).
    std::vector<std::uint8_t> png = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n',
                                     0,    0,   0,   13,  'I',  'H',  'D',  'R'};
    for (std::uint32_t v : {16000u, 16000u})
        png.insert(png.end(), {0, 0, std::uint8_t(v >> 8), std::uint8_t(v)});
    png.insert(png.end(), {8, 2, 0, 0, 0, 0, 0, 0, 0});  // depth 8, RGB; CRC (stb skips it)
    write_file(dir.path / "cat" / "big.png", png);
    const auto ds = ember::data::ImageFolderDataset::new_classification(dir.path);
    REQUIRE(ds.len() == 1);
    CHECK_THAT(message_of([&] { (void)ds.get(0); }),
               Catch::Contains("big.png") &&
                   // Four bytes a pixel: stb converts through RGBA whatever the file holds.
                   Catch::Contains("the image's pixels would take 1024000000 bytes"));
    // Swapped for a FIFO after the listing: refused, not waited on.
    fs::remove(dir.path / "cat" / "big.png");
    REQUIRE(::mkfifo((dir.path / "cat" / "big.png").c_str(), 0600) == 0);
    CHECK_THAT(message_of([&] { (void)ds.get(0); }), Catch::Contains("is a FIFO"));
}

TEST_CASE("attack: a SQLite dataset with escape sequences in its names is escaped in the errors",
          "[untrusted][hostile]") {
    using ember::data::detail::SqliteReader;
    TempDir dir("sqlite");
    // A database made by someone else: its metadata, split names and schema are theirs.
    auto make = [&](const char* name, const std::vector<std::string>& sql) {
        const fs::path file = dir.path / name;
        sqlite3* db = nullptr;
        REQUIRE(sqlite3_open(file.c_str(), &db) == SQLITE_OK);
        for (const std::string& s : sql) {
            char* err = nullptr;
            const int rc = sqlite3_exec(db, s.c_str(), nullptr, nullptr, &err);
            INFO(s << ": " << (err ? err : ""));
            sqlite3_free(err);
            REQUIRE(rc == SQLITE_OK);
        }
        sqlite3_close(db);
        return file;
    };
    auto clean = [](const std::string& m) {
        return m.find('\x1b') == std::string::npos && m.find('\n') == std::string::npos;
    };
    const std::string meta = "CREATE TABLE ember_dataset (key TEXT, value TEXT)";
    const std::string items = "CREATE TABLE items (split TEXT, row_id INTEGER, item BLOB)";
    // The format and version strings come from the file.
    auto m = message_of([&] {
        SqliteReader(make("format.db", {meta,
                                        "INSERT INTO ember_dataset VALUES ('format', "
                                        "'x' || char(27) || ']0;pwned' || char(10))"}),
                     "train");
    });
    CHECK_THAT(m, Catch::Contains("format 'x\\x1b]0;pwned\\n'"));
    CHECK(clean(m));
    m = message_of([&] {
        SqliteReader(
            make("version.db", {meta,
                                "INSERT INTO ember_dataset VALUES ('format', "
                                "'ember-sqlite-dataset'), ('version', '9' || char(27) || '[2J')"}),
            "train");
    });
    CHECK_THAT(m, Catch::Contains("version '9\\x1b[2J'"));
    CHECK(clean(m));
    const std::string ok_meta =
        "INSERT INTO ember_dataset VALUES ('format', 'ember-sqlite-dataset'), ('version', '1')";
    // Split names listed when the asked-for one is missing; a NULL split (which ember's writer
    // never makes) has no name to list and must not crash the listing.
    m = argument_message_of([&] {
        SqliteReader(make("splits.db", {meta, ok_meta, items,
                                        "INSERT INTO items VALUES ('tr' || char(27) || "
                                        "'[31m' || char(10), 0, x'00'), (NULL, 0, x'00')"}),
                     "valid");
    });
    CHECK_THAT(m, Catch::Contains("(splits: 'tr\\x1b[31m\\n')"));
    CHECK(clean(m));
    // SQLite's own messages quote the schema: a view over a table named with escapes.
    m = message_of([&] {
        SqliteReader(make("schema.db",
                          {meta, ok_meta, "CREATE VIEW items AS SELECT * FROM \"ev\x1bil\nx\""}),
                     "train");
    });
    CHECK_THAT(m, Catch::Contains("no such table: main.ev\\x1bil\\nx"));
    CHECK(clean(m));
}

TEST_CASE("attack: image and class names with escape sequences are escaped in the errors",
          "[untrusted][hostile]") {
    using ember::data::ImageFolderDataset;
    TempDir dir("imgnames");
    // A folder someone else made: its class and file names are theirs.
    const std::string cls = "c\x1b]0;pwned\x07";
    fs::create_directories(dir.path / cls);
    write_file(dir.path / cls / "bad\n\x1b[2J.png", {'n', 'o', 't', ' ', 'a', ' ', 'p', 'n', 'g'});
    const auto ds = ImageFolderDataset::new_classification(dir.path);
    REQUIRE(ds.len() == 1);
    const std::string m = message_of([&] { (void)ds.get(0); });
    CHECK_THAT(m, Catch::Contains("c\\x1b]0;pwned\\x07/bad\\n\\x1b[2J.png"));
    CHECK(m.find('\x1b') == std::string::npos);
    CHECK(m.find('\n') == std::string::npos);
    // A class name given with the items that is not among the classes.
    const std::string m2 = argument_message_of([&] {
        (void)ImageFolderDataset::new_classification_with_items(
            {{dir.path / "x.png", "do\x1b[8mg"}}, {"cat"});
    });
    CHECK_THAT(m2, Catch::Contains("has class \"do\\x1b[8mg\""));
    CHECK(m2.find('\x1b') == std::string::npos);
    const std::string m3 = argument_message_of([&] {
        (void)ImageFolderDataset::new_classification_with_items({}, {"a\nb", "a\nb"});
    });
    CHECK_THAT(m3, Catch::Contains("class \"a\\nb\" is listed twice"));
}

}  // namespace test_untrusted
