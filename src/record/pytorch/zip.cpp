// The zip container of torch.save files. PyTorch's writer (miniz) stores every entry
// uncompressed, sets the data-descriptor flag (so local headers may carry zero sizes: the
// central directory is what counts) and always writes the zip64 end records; archives made by
// other tools (re-zipped files) may deflate, which zlib undoes.
#include "zip.hpp"

#include <zlib.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>

namespace ember::record::detail::pt {
namespace {

constexpr std::uint32_t kLocalSig = 0x04034b50;
constexpr std::uint32_t kCentralSig = 0x02014b50;
constexpr std::uint32_t kEndSig = 0x06054b50;
constexpr std::uint32_t kEnd64Sig = 0x06064b50;
constexpr std::uint32_t kEnd64LocatorSig = 0x07064b50;
constexpr std::size_t kEndSize = 22;
constexpr std::size_t kEnd64Size = 56;
constexpr std::size_t kLocatorSize = 20;
constexpr std::size_t kCentralSize = 46;
constexpr std::size_t kLocalSize = 30;
constexpr std::uint32_t kMax32 = 0xffffffffu;
// Deflate cannot expand its input more than about 1032 times: a declared size beyond that is a
// lie, and must not become an allocation.
constexpr std::uint64_t kMaxDeflateRatio = 1032;

template <typename T>
T get(std::span<const std::byte> b, std::size_t at) {
    T v{};
    std::memcpy(&v, b.data() + at, sizeof(T));  // zip is little-endian, as the host (checked)
    return v;
}

std::uint32_t crc_of(std::span<const std::byte> data) {
    uLong crc = crc32(0L, Z_NULL, 0);
    // zlib takes uInt lengths: feed entries above 4 GiB in pieces.
    while (!data.empty()) {
        const std::size_t n = std::min<std::size_t>(data.size(), 1u << 30);
        crc = crc32(crc, reinterpret_cast<const Bytef*>(data.data()), static_cast<uInt>(n));
        data = data.subspan(n);
    }
    return static_cast<std::uint32_t>(crc);
}

}  // namespace

static_assert(std::endian::native == std::endian::little,
              "zip and torch.save data are little-endian; big-endian hosts would need byte swaps");

ZipReader::ZipReader(std::span<const std::byte> bytes, const Source& src)
    : bytes_(bytes), src_(src) {
    const std::size_t n = bytes.size();
    if (n < kEndSize) src.fail("not a zip archive: ", n, " bytes, fewer than a zip end record");
    // The end record sits at the end, followed only by a comment of at most 64 KiB.
    std::size_t end = std::numeric_limits<std::size_t>::max();
    const std::size_t lowest = n - kEndSize > 0xffff ? n - kEndSize - 0xffff : 0;
    for (std::size_t at = n - kEndSize + 1; at-- > lowest;) {
        if (get<std::uint32_t>(bytes, at) == kEndSig &&
            at + kEndSize + get<std::uint16_t>(bytes, at + 20) == n) {
            end = at;
            break;
        }
    }
    if (end == std::numeric_limits<std::size_t>::max()) {
        // torch < 1.6 wrote a bare pickle stream: say so rather than "bad zip".
        if (n >= 2 && bytes[0] == std::byte{0x80} && bytes[1] == std::byte{0x02})
            src.fail(
                "a pickle stream without a zip container (the legacy format of torch < 1.6, "
                "which ember does not read: re-save it with a current torch.save)");
        src.fail("not a zip archive (no end-of-central-directory record)");
    }
    if (get<std::uint16_t>(bytes, end + 4) != 0 || get<std::uint16_t>(bytes, end + 6) != 0)
        src.fail("multi-disk zip archives are not supported");
    std::uint64_t count = get<std::uint16_t>(bytes, end + 10);
    std::uint64_t dir_size = get<std::uint32_t>(bytes, end + 12);
    std::uint64_t dir_offset = get<std::uint32_t>(bytes, end + 16);
    std::uint64_t dir_limit = end;  // the directory ends before the end records
    if (end >= kLocatorSize && get<std::uint32_t>(bytes, end - kLocatorSize) == kEnd64LocatorSig) {
        const std::uint64_t at = get<std::uint64_t>(bytes, end - kLocatorSize + 8);
        if (at > end - kLocatorSize || end - kLocatorSize - at < kEnd64Size ||
            get<std::uint32_t>(bytes, static_cast<std::size_t>(at)) != kEnd64Sig)
            src.fail("the zip64 end record is missing or out of place");
        const auto z = static_cast<std::size_t>(at);
        count = get<std::uint64_t>(bytes, z + 32);
        dir_size = get<std::uint64_t>(bytes, z + 40);
        dir_offset = get<std::uint64_t>(bytes, z + 48);
        dir_limit = at;
    }
    if (dir_offset > dir_limit || dir_size > dir_limit - dir_offset)
        src.fail("the zip central directory (", dir_size, " bytes at ", dir_offset,
                 ") lies outside the archive of ", n, " bytes");
    if (count > dir_size / kCentralSize)
        src.fail("the zip central directory claims ", count, " entries in ", dir_size, " bytes");

    entries_.reserve(static_cast<std::size_t>(count));
    std::size_t at = static_cast<std::size_t>(dir_offset);
    const std::size_t stop = static_cast<std::size_t>(dir_offset + dir_size);
    for (std::uint64_t i = 0; i < count; ++i) {
        if (stop - at < kCentralSize || get<std::uint32_t>(bytes, at) != kCentralSig)
            src.fail("zip central directory entry ", i, " is truncated or has a wrong signature");
        const auto flags = get<std::uint16_t>(bytes, at + 8);
        ZipEntry e;
        e.method = get<std::uint16_t>(bytes, at + 10);
        e.crc = get<std::uint32_t>(bytes, at + 16);
        e.compressed = get<std::uint32_t>(bytes, at + 20);
        e.size = get<std::uint32_t>(bytes, at + 24);
        const std::size_t name_len = get<std::uint16_t>(bytes, at + 28);
        const std::size_t extra_len = get<std::uint16_t>(bytes, at + 30);
        const std::size_t comment_len = get<std::uint16_t>(bytes, at + 32);
        e.local_offset = get<std::uint32_t>(bytes, at + 42);
        if (stop - at - kCentralSize < name_len + extra_len + comment_len)
            src.fail("zip central directory entry ", i, " runs past the directory");
        e.name.assign(reinterpret_cast<const char*>(bytes.data() + at + kCentralSize), name_len);
        if (flags & 1u) src.fail("zip entry '", printable(e.name), "' is encrypted");
        // Sizes and the offset that do not fit 32 bits live in the zip64 extra field, in this
        // order, each present only when its 32-bit field says 0xffffffff.
        std::uint64_t* const wide[] = {&e.size, &e.compressed, &e.local_offset};
        bool need[] = {e.size == kMax32, e.compressed == kMax32, e.local_offset == kMax32};
        std::size_t x = at + kCentralSize + name_len;
        const std::size_t x_end = x + extra_len;
        while (x_end - x >= 4) {
            const auto id = get<std::uint16_t>(bytes, x);
            const std::size_t len = get<std::uint16_t>(bytes, x + 2);
            if (x_end - x - 4 < len)
                src.fail("zip entry '", printable(e.name), "' has a truncated extra field");
            if (id == 0x0001) {
                std::size_t p = x + 4;
                for (int k = 0; k < 3; ++k) {
                    if (!need[k]) continue;
                    if (x + 4 + len - p < 8)
                        src.fail("zip entry '", printable(e.name), "' has a truncated zip64 field");
                    *wide[k] = get<std::uint64_t>(bytes, p);
                    need[k] = false;
                    p += 8;
                }
            }
            x += 4 + len;
        }
        if (need[0] || need[1] || need[2])
            src.fail("zip entry '", printable(e.name),
                     "' lacks the zip64 sizes its header announces");
        if (e.method != 0 && e.method != 8)
            src.fail("zip entry '", printable(e.name), "' uses compression method ", e.method,
                     " (stored and deflate are supported)");
        if (e.method == 0 && e.compressed != e.size)
            src.fail("stored zip entry '", printable(e.name), "' has ", e.compressed,
                     " bytes but declares ", e.size);
        if (e.method == 8 && e.size > e.compressed * kMaxDeflateRatio + 64)
            src.fail("deflated zip entry '", printable(e.name), "' declares ", e.size,
                     " bytes from ", e.compressed,
                     " compressed ones, more than deflate can produce");
        if (!index_.emplace(e.name, entries_.size()).second)
            src.fail("zip entry '", printable(e.name), "' appears twice");
        entries_.push_back(std::move(e));
        at += kCentralSize + name_len + extra_len + comment_len;
    }
}

const ZipEntry* ZipReader::find(std::string_view name) const {
    const auto it = index_.find(std::string(name));
    return it == index_.end() ? nullptr : &entries_[it->second];
}

std::span<const std::byte> ZipReader::read(const ZipEntry& e,
                                           std::vector<std::byte>& scratch) const {
    const std::uint64_t n = bytes_.size();
    if (e.local_offset > n || n - e.local_offset < kLocalSize ||
        get<std::uint32_t>(bytes_, static_cast<std::size_t>(e.local_offset)) != kLocalSig)
        src_.fail("zip entry '", printable(e.name), "' has no local header at byte ",
                  e.local_offset);
    const auto at = static_cast<std::size_t>(e.local_offset);
    const std::size_t name_len = get<std::uint16_t>(bytes_, at + 26);
    const std::size_t extra_len = get<std::uint16_t>(bytes_, at + 28);
    const std::uint64_t data = e.local_offset + kLocalSize + name_len + extra_len;
    if (data > n || n - data < e.compressed)
        src_.fail("zip entry '", printable(e.name), "' (", e.compressed, " bytes at ", data,
                  ") runs past the end of the archive of ", n, " bytes");
    if (name_len != e.name.size() ||
        std::memcmp(bytes_.data() + at + kLocalSize, e.name.data(), name_len) != 0)
        src_.fail("zip entry '", printable(e.name), "' has a local header of another name");
    const auto raw =
        bytes_.subspan(static_cast<std::size_t>(data), static_cast<std::size_t>(e.compressed));
    std::span<const std::byte> out = raw;
    if (e.method == 8) {
        check_decoded_size(e.size, e.compressed, "zip entry '" + printable(e.name) + "'",
                           src_.name);
        scratch.assign(static_cast<std::size_t>(e.size), std::byte{0});
        z_stream zs{};
        if (inflateInit2(&zs, -MAX_WBITS) != Z_OK) src_.fail("zlib cannot start inflating");
        std::span<const std::byte> in = raw;
        std::size_t produced = 0;
        Bytef dummy = 0;  // zlib wants a valid pointer even for an empty output
        zs.next_out = scratch.empty() ? &dummy : reinterpret_cast<Bytef*>(scratch.data());
        int rc = Z_OK;
        // zlib counts in uInt: feed and drain in pieces of at most 1 GiB.
        for (;;) {
            if (zs.avail_in == 0 && !in.empty()) {
                const std::size_t k = std::min<std::size_t>(in.size(), 1u << 30);
                zs.next_in = reinterpret_cast<Bytef*>(const_cast<std::byte*>(in.data()));
                zs.avail_in = static_cast<uInt>(k);
                in = in.subspan(k);
            }
            if (zs.avail_out == 0 && produced < scratch.size()) {
                zs.next_out = reinterpret_cast<Bytef*>(scratch.data() + produced);
                zs.avail_out =
                    static_cast<uInt>(std::min<std::size_t>(scratch.size() - produced, 1u << 30));
            }
            const uInt before = zs.avail_out;
            rc = inflate(&zs, Z_NO_FLUSH);
            produced += before - zs.avail_out;
            if (rc == Z_STREAM_END || (rc != Z_OK && rc != Z_BUF_ERROR)) break;
            // No progress possible: the input ran out (truncated) or the output is full (the
            // entry holds more than it declares).
            if (rc == Z_BUF_ERROR && ((zs.avail_in == 0 && in.empty()) || zs.avail_out == 0)) break;
        }
        inflateEnd(&zs);
        if (rc != Z_STREAM_END || produced != scratch.size() || zs.avail_in != 0 || !in.empty())
            src_.fail("deflated zip entry '", printable(e.name),
                      "' is corrupted or does not hold the ", e.size, " bytes it declares");
        out = scratch;
    }
    if (crc_of(out) != e.crc)
        src_.fail("zip entry '", printable(e.name), "' fails its CRC-32 check");
    return out;
}

}  // namespace ember::record::detail::pt
