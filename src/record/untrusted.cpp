// Reading untrusted files: the read limits, the regular-file rule, printable messages.
#include "ember/record/untrusted.hpp"

#include <cstdlib>
#include <cstring>
#include <limits>
#if !EMBER_FREESTANDING
#include <mutex>
#endif
#include <optional>

#include "ember/tensor/error.hpp"

#if !EMBER_FREESTANDING
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cerrno>
#endif

namespace ember::record {
namespace {

#if !EMBER_FREESTANDING
// "16G", "512M", "1024": a byte count with an optional binary suffix.
std::uint64_t parse_size(const char* var, const char* text, bool suffixes) {
    char* end = nullptr;
    errno = 0;
    const unsigned long long v = std::strtoull(text, &end, 10);
    EMBER_CHECK(end != text && errno == 0 && text[0] != '-', Argument, var, "='", printable(text),
                "' is not a non-negative integer");
    int shift = 0;
    if (suffixes && *end != '\0') {
        switch (*end) {
            case 'K':
            case 'k':
                shift = 10;
                break;
            case 'M':
            case 'm':
                shift = 20;
                break;
            case 'G':
            case 'g':
                shift = 30;
                break;
            case 'T':
            case 't':
                shift = 40;
                break;
            default:
                break;
        }
        if (shift) ++end;
    }
    EMBER_CHECK(*end == '\0', Argument, var, "='", printable(text),
                "' is not a byte count (digits, optionally followed by K, M, G or T)");
    const std::uint64_t out = std::uint64_t{v} << shift;
    EMBER_CHECK((out >> shift) == v, Argument, var, "='", printable(text), "' overflows 64 bits");
    return out;
}

ReadLimits from_environment() {
    ReadLimits l;
    if (const char* s = std::getenv("EMBER_MAX_READ_BYTES"); s && *s)
        l.max_bytes = parse_size("EMBER_MAX_READ_BYTES", s, true);
    if (const char* s = std::getenv("EMBER_MAX_EXPANSION"); s && *s)
        l.max_expansion = parse_size("EMBER_MAX_EXPANSION", s, false);
    if (const char* s = std::getenv("EMBER_EXPANSION_FLOOR"); s && *s)
        l.expansion_floor = parse_size("EMBER_EXPANSION_FLOOR", s, true);
    if (const char* s = std::getenv("EMBER_VERIFY_CHECKSUMS"); s && *s) {
        const std::string_view v(s);
        EMBER_CHECK(v == "0" || v == "1", Argument, "EMBER_VERIFY_CHECKSUMS='", printable(v),
                    "' must be 0 or 1");
        l.verify_checksums = v == "1";
    }
    return l;
}
#else
ReadLimits from_environment() {
    return {};
}
#endif

#if !EMBER_FREESTANDING
std::mutex& limits_mutex() {
    static std::mutex m;
    return m;
}
using Lock = std::lock_guard<std::mutex>;
#else
// Firmware runs one thread and may have no std::mutex.
struct Lock {
    explicit Lock(int) {}
};
int limits_mutex() {
    return 0;
}
#endif
std::optional<ReadLimits>& current() {
    static std::optional<ReadLimits> l;
    return l;
}

// The length of the UTF-8 sequence starting at s[i] when it is valid and not a C1 control,
// else 0.
std::size_t utf8_letter(std::string_view s, std::size_t i) {
    const auto b = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
    const unsigned c = b(i);
    std::size_t n = 0;
    std::uint32_t cp = 0;
    if (c >= 0xc2 && c <= 0xdf)
        n = 2, cp = c & 0x1f;
    else if (c >= 0xe0 && c <= 0xef)
        n = 3, cp = c & 0x0f;
    else if (c >= 0xf0 && c <= 0xf4)
        n = 4, cp = c & 0x07;
    else
        return 0;
    if (i + n > s.size()) return 0;
    for (std::size_t k = 1; k < n; ++k) {
        if ((b(i + k) & 0xc0) != 0x80) return 0;
        cp = (cp << 6) | (b(i + k) & 0x3f);
    }
    const bool overlong = (n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000);
    const bool surrogate = cp >= 0xd800 && cp <= 0xdfff;
    const bool c1 = cp >= 0x80 && cp <= 0x9f;  // terminals read some of these as escapes
    if (overlong || surrogate || c1 || cp > 0x10ffff) return 0;
    return n;
}

}  // namespace

std::uint64_t ReadLimits::max_decoded(std::uint64_t stored) const {
    std::uint64_t by_ratio = 0;
    if (__builtin_mul_overflow(stored, max_expansion, &by_ratio))
        by_ratio = std::numeric_limits<std::uint64_t>::max();
    const std::uint64_t allowed = by_ratio > expansion_floor ? by_ratio : expansion_floor;
    return allowed < max_bytes ? allowed : max_bytes;
}

ReadLimits read_limits() {
    const Lock lock(limits_mutex());
    if (!current()) current() = detail::read_limits_from_environment();
    return *current();
}

ReadLimits set_read_limits(const ReadLimits& limits) {
    const Lock lock(limits_mutex());
    const ReadLimits previous = current() ? *current() : detail::read_limits_from_environment();
    current() = limits;
    return previous;
}

std::string printable(std::string_view bytes, std::size_t max_bytes) {
    std::string out;
    const std::size_t n = bytes.size() < max_bytes ? bytes.size() : max_bytes;
    for (std::size_t i = 0; i < n;) {
        const auto c = static_cast<unsigned char>(bytes[i]);
        if (c == '\\') {
            out += "\\\\";
        } else if (c == '\n') {
            out += "\\n";
        } else if (c == '\t') {
            out += "\\t";
        } else if (c == '\r') {
            out += "\\r";
        } else if (c >= 0x20 && c < 0x7f) {
            out.push_back(static_cast<char>(c));
        } else if (const std::size_t len = utf8_letter(bytes, i); len > 0 && i + len <= n) {
            out.append(bytes.substr(i, len));
            i += len;
            continue;
        } else {
            constexpr char digits[] = "0123456789abcdef";
            out += "\\x";
            out.push_back(digits[c >> 4]);
            out.push_back(digits[c & 0xf]);
        }
        ++i;
    }
    if (bytes.size() > n) out += "...";
    return out;
}

namespace detail {

ReadLimits read_limits_from_environment() {
    return from_environment();
}

void check_decoded_size(std::uint64_t decoded, std::uint64_t stored, std::string_view what,
                        std::string_view source) {
    const ReadLimits l = read_limits();
    if (decoded <= l.max_decoded(stored)) return;
    if (decoded > l.max_bytes)
        EMBER_FAIL(Format, printable(source), ": ", what, " would take ", decoded,
                   " bytes, more than the read limit of ", l.max_bytes,
                   " (ReadLimits::max_bytes, EMBER_MAX_READ_BYTES)");
    EMBER_FAIL(Format, printable(source), ": ", what, " would take ", decoded, " bytes from ",
               stored, " stored ones, an expansion beyond ", l.max_expansion, ":1 above ",
               l.expansion_floor,
               " bytes (ReadLimits::max_expansion and expansion_floor, EMBER_MAX_EXPANSION and "
               "EMBER_EXPANSION_FLOOR)");
}

#if !EMBER_FREESTANDING
RegularFile::RegularFile(const std::filesystem::path& path, std::string_view what)
    : name_(printable(path.string(), 4096)) {
    // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer forever.
    fd_ = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd_ < 0) {
        const int err = errno;
        if (err == ENOENT) EMBER_FAIL(Format, name_, ": no such file (", what, ")");
        EMBER_FAIL(Format, name_, ": cannot open (", what, "): ", std::strerror(err));
    }
    struct stat st {};
    if (::fstat(fd_, &st) != 0) {
        const int err = errno;
        ::close(fd_);
        EMBER_FAIL(Format, name_, ": cannot stat (", what, "): ", std::strerror(err));
    }
    if (!S_ISREG(st.st_mode)) {
        ::close(fd_);
        const char* kind = S_ISDIR(st.st_mode)    ? "a directory"
                           : S_ISFIFO(st.st_mode) ? "a FIFO"
                           : S_ISCHR(st.st_mode)  ? "a character device"
                           : S_ISBLK(st.st_mode)  ? "a block device"
                           : S_ISSOCK(st.st_mode) ? "a socket"
                                                  : "not a regular file";
        EMBER_FAIL(Format, name_, ": is ", kind, ", not a regular file (", what, ")");
    }
    // Reads of a regular file never block; clear the flag all the same for later users of fd.
    const int flags = ::fcntl(fd_, F_GETFL);
    if (flags >= 0) ::fcntl(fd_, F_SETFL, flags & ~O_NONBLOCK);
    size_ = static_cast<std::uint64_t>(st.st_size);
}

RegularFile::~RegularFile() {
    if (fd_ >= 0) ::close(fd_);
}

int RegularFile::release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
}

std::vector<std::byte> RegularFile::read_all() {
    const ReadLimits l = read_limits();
    if (size_ > l.max_bytes)
        EMBER_FAIL(Format, name_, ": ", size_, " bytes, more than the read limit of ", l.max_bytes,
                   " (ReadLimits::max_bytes, EMBER_MAX_READ_BYTES)");
    std::vector<std::byte> bytes(static_cast<std::size_t>(size_));
    std::size_t got = 0;
    while (got < bytes.size()) {
        const ssize_t r = ::read(fd_, bytes.data() + got, bytes.size() - got);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) EMBER_FAIL(Format, name_, ": read error: ", std::strerror(errno));
        if (r == 0) break;
        got += static_cast<std::size_t>(r);
    }
    // A file that shrank while read is read as it now stands; one that grew is cut at the size
    // it had when opened (the limit was checked against that size).
    bytes.resize(got);
    return bytes;
}
#endif

}  // namespace detail
}  // namespace ember::record
