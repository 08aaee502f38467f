// The gzip layer of the *Gz recorders, on zlib. zlib's counters are 32-bit (uInt), so data is
// fed and collected in chunks; a record may be larger than 4 GiB.
#include <zlib.h>

#include <algorithm>
#include <limits>
#include <new>

#include "codec.hpp"
#include "ember/record/untrusted.hpp"

namespace ember::record::detail {
namespace {

constexpr std::size_t kChunk = std::size_t{1} << 30;
constexpr int kGzipWindow = 15 + 16;  // 2^15 window, gzip wrapper (not zlib, not raw)

// Gives the next piece of `in` to zlib when it has used up the last one.
struct Feed {
    std::span<const std::byte> in;
    std::size_t pos = 0;

    void refill(z_stream& z) {
        if (z.avail_in != 0 || pos == in.size()) return;
        const std::size_t n = std::min(in.size() - pos, kChunk);
        z.next_in = const_cast<Bytef*>(reinterpret_cast<const Bytef*>(in.data() + pos));
        z.avail_in = static_cast<uInt>(n);
        pos += n;
    }
    bool done(const z_stream& z) const { return z.avail_in == 0 && pos == in.size(); }
};

// Makes room for more output and points zlib at it; returns the room given. The buffer never
// grows past `cap` bytes.
std::size_t make_room(std::vector<std::byte>& out, std::size_t produced, z_stream& z,
                      std::size_t cap = std::numeric_limits<std::size_t>::max()) {
    if (produced == out.size())
        out.resize(std::min(cap, std::max<std::size_t>(out.size() * 2, 1 << 16)));
    const std::size_t room = std::min(out.size() - produced, kChunk);
    z.next_out = reinterpret_cast<Bytef*>(out.data() + produced);
    z.avail_out = static_cast<uInt>(room);
    return room;
}

}  // namespace

std::vector<std::byte> gzip(std::span<const std::byte> bytes) {
    z_stream z{};
    if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, kGzipWindow, 8, Z_DEFAULT_STRATEGY) !=
        Z_OK)
        throw std::bad_alloc();
    struct End {
        z_stream& z;
        ~End() { deflateEnd(&z); }
    } end{z};
    std::vector<std::byte> out(deflateBound(&z, static_cast<uLong>(bytes.size())));
    Feed feed{bytes};
    std::size_t produced = 0;
    for (;;) {
        feed.refill(z);
        const std::size_t room = make_room(out, produced, z);
        const int ret = deflate(&z, feed.pos == bytes.size() ? Z_FINISH : Z_NO_FLUSH);
        produced += room - z.avail_out;
        if (ret == Z_STREAM_END) break;
        // Z_BUF_ERROR only means "no progress possible now": the loop gives more room or input.
        EMBER_CHECK(ret == Z_OK || ret == Z_BUF_ERROR, Generic, "record: gzip compression failed (",
                    z.msg ? z.msg : "zlib error", ")");
    }
    out.resize(produced);
    return out;
}

std::vector<std::byte> gunzip(std::span<const std::byte> bytes, const Source& src) {
    if (bytes.size() < 2 || bytes[0] != std::byte{0x1f} || bytes[1] != std::byte{0x8b})
        src.fail("it is not gzip-compressed (another format?)");
    z_stream z{};
    if (inflateInit2(&z, kGzipWindow) != Z_OK) throw std::bad_alloc();
    struct End {
        z_stream& z;
        ~End() { inflateEnd(&z); }
    } end{z};
    // The decompressed size is known only once inflated (the trailer's is mod 2^32 and
    // untrusted): the buffer grows as data comes, never past the read limit for this many
    // compressed bytes, plus one byte to tell "exactly at the limit" from "beyond it".
    const ReadLimits limits = read_limits();
    const std::uint64_t allowed = limits.max_decoded(bytes.size());
    const std::size_t cap = static_cast<std::size_t>(
        std::min<std::uint64_t>(allowed, std::numeric_limits<std::size_t>::max() - 1) + 1);
    std::vector<std::byte> out(std::min({bytes.size() * 4, std::size_t{1} << 26, cap}));
    Feed feed{bytes};
    std::size_t produced = 0;
    for (;;) {
        feed.refill(z);
        const std::size_t room = make_room(out, produced, z, cap);
        const int ret = inflate(&z, Z_NO_FLUSH);
        produced += room - z.avail_out;
        if (produced > allowed) {
            src.fail("it decompresses to more than ", allowed, " bytes from ", bytes.size(),
                     " compressed ones, beyond the read limits (",
                     allowed == limits.max_bytes
                         ? "ReadLimits::max_bytes, EMBER_MAX_READ_BYTES"
                         : "an expansion beyond " + std::to_string(limits.max_expansion) +
                               ":1 above " + std::to_string(limits.expansion_floor) +
                               " bytes: ReadLimits::max_expansion and expansion_floor, "
                               "EMBER_MAX_EXPANSION and EMBER_EXPANSION_FLOOR",
                     ")");
        }
        if (ret == Z_STREAM_END) break;
        if (ret == Z_DATA_ERROR)
            src.fail("corrupted gzip data (", printable(z.msg ? z.msg : "bad data"), ")");
        if (ret == Z_NEED_DICT) src.fail("gzip data needs a preset dictionary");
        if (ret == Z_MEM_ERROR) throw std::bad_alloc();
        if (ret != Z_OK && ret != Z_BUF_ERROR) src.fail("gzip error ", ret);
        // Output room left over means inflate stopped for want of input: if none is left, the
        // stream ends early.
        if (z.avail_out != 0 && feed.done(z)) src.fail("truncated gzip data");
    }
    if (!feed.done(z)) src.fail("trailing bytes after the gzip data");
    out.resize(produced);
    return out;
}

}  // namespace ember::record::detail
