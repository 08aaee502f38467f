// The recorders' entry points: format dispatch, extensions, and atomic file writes.
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>

#if __has_include(<unistd.h>)
#include <fcntl.h>
#include <unistd.h>
#define EMBER_RECORD_HAVE_FSYNC 1
#endif

#include "codec.hpp"
#include "ember/record/untrusted.hpp"

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
#ifdef EMBER_RECORD_HAVE_FSYNC
    // The rename itself is on disk once the directory is synced: a crash after this returns
    // cannot bring the old file back.
    const std::filesystem::path dir = file.has_parent_path() ? file.parent_path() : ".";
    const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        const int rc = ::fsync(dfd);
        const int derr = errno;
        ::close(dfd);
        // EINVAL: a file system that does not sync directories.
        EMBER_CHECK(rc == 0 || derr == EINVAL, Argument, what, ": wrote '", file.string(),
                    "' but cannot sync its directory: ", std::strerror(derr));
    }
#endif
}

std::vector<std::byte> read_bytes(const std::filesystem::path& file, std::string_view what) {
    // A regular file only, its size checked against the read limit before allocating: a path
    // naming /dev/zero or a FIFO is refused before a byte is read.
    return RegularFile(file, what).read_all();
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
