// The recorders' entry points: format dispatch, extensions, and atomic file writes.
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>

#if __has_include(<unistd.h>)
#include <unistd.h>
#define EMBER_RECORD_HAVE_FSYNC 1
#endif

#include "codec.hpp"

namespace ember::record::detail {

std::filesystem::path with_extension(const std::filesystem::path& path, std::string_view ext) {
    const std::string name = path.filename().string();
    EMBER_CHECK(!name.empty() && name != "." && name != "..", Argument, "record: '", path.string(),
                "' names a directory, not a file");
    const std::string suffix = "." + std::string(ext);
    if (name.size() > suffix.size() && name.ends_with(suffix)) return path;
    std::filesystem::path out = path;
    out += suffix;
    return out;
}

namespace {

// A name no other writer (thread, process) picks: the target's name, hidden, plus a random tag.
std::filesystem::path temp_name(const std::filesystem::path& file) {
    static std::atomic<std::uint64_t> counter{0};
    static const std::uint64_t seed = [] {
        std::random_device rd;
        return (std::uint64_t{rd()} << 32) ^ rd() ^
               static_cast<std::uint64_t>(
                   std::chrono::steady_clock::now().time_since_epoch().count());
    }();
    const std::uint64_t tag = seed + 0x9e3779b97f4a7c15ull * ++counter;
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(tag));
    std::filesystem::path tmp = file;
    tmp.replace_filename("." + file.filename().string() + ".tmp-" + hex);
    return tmp;
}

[[noreturn]] void write_failed(const std::filesystem::path& file, const std::filesystem::path& tmp,
                               std::string_view what, const std::string& why) {
    std::error_code ignored;
    std::filesystem::remove(tmp, ignored);
    EMBER_FAIL(Argument, what, ": cannot write '", file.string(), "': ", why);
}

}  // namespace

void write_bytes_atomic(const std::filesystem::path& file, std::span<const std::byte> bytes,
                        std::string_view what) {
    std::filesystem::path tmp;
    std::FILE* f = nullptr;
    for (int attempt = 0; attempt < 8 && !f; ++attempt) {
        tmp = temp_name(file);
        f = std::fopen(tmp.c_str(), "wbx");  // x: never reuse a file someone else made
        if (!f && errno != EEXIST) break;
    }
    if (!f) {
        const int err = errno;
        EMBER_FAIL(Argument, what, ": cannot write '", file.string(), "': cannot create '",
                   tmp.string(), "': ", std::strerror(err));
    }
    bool ok = bytes.empty() || std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
    ok = std::fflush(f) == 0 && ok;
#ifdef EMBER_RECORD_HAVE_FSYNC
    // The rename below must never expose a file whose data is not on disk yet.
    ok = ok && ::fsync(::fileno(f)) == 0;
#endif
    const int err = errno;
    ok = std::fclose(f) == 0 && ok;
    if (!ok) write_failed(file, tmp, what, std::strerror(err ? err : errno));

    std::error_code ec;
    std::filesystem::rename(tmp, file, ec);
    if (ec) write_failed(file, tmp, what, ec.message());
}

std::vector<std::byte> read_bytes(const std::filesystem::path& file, std::string_view what) {
    const std::string name = file.string();
    std::error_code ec;
    const auto status = std::filesystem::status(file, ec);
    if (!std::filesystem::exists(status)) EMBER_FAIL(Format, name, ": no such file (", what, ")");
    if (std::filesystem::is_directory(status)) EMBER_FAIL(Format, name, ": is a directory");

    std::ifstream in(file, std::ios::binary);
    if (!in) EMBER_FAIL(Format, name, ": cannot open: ", std::strerror(errno));
    std::vector<std::byte> bytes;
    if (const auto size = std::filesystem::file_size(file, ec); !ec) bytes.reserve(size);
    char buf[1 << 16];
    while (in.read(buf, sizeof buf) || in.gcount() > 0) {
        const auto* p = reinterpret_cast<const std::byte*>(buf);
        bytes.insert(bytes.end(), p, p + in.gcount());
    }
    if (in.bad()) EMBER_FAIL(Format, name, ": read error");
    return bytes;
}

void write_file(const Value& value, const std::filesystem::path& file, Format format,
                PrecisionSettings precision) {
    // Encode first: a tree the format cannot hold leaves the disk untouched.
    write_bytes_atomic(file, encode(value, format, precision), "record");
}

Value read_file(const std::filesystem::path& file, Format format) {
    const std::string what = std::string(format_name(format)) + " record";
    return decode(read_bytes(file, what), format, file.string());
}

}  // namespace ember::record::detail
