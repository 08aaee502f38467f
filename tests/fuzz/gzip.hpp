#pragma once
// zlib for the harnesses: the targets behind a gzip layer or a checksum take the plain bytes
// from the fuzzer and wrap them here, so that mutations reach the parser inside rather than
// dying at the CRC check.
#include <zlib.h>

#include <stdexcept>
#include <vector>

#include "fuzz.hpp"

namespace ember::fuzz {

/// `bytes` as one gzip member.
inline std::vector<std::byte> gzip(Input bytes) {
    z_stream z{};
    if (deflateInit2(&z, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        throw std::runtime_error("fuzz harness: deflateInit2 failed");
    std::vector<std::byte> out(deflateBound(&z, bytes.size()) + 32);
    z.next_in = reinterpret_cast<Bytef*>(const_cast<std::byte*>(bytes.data()));
    z.avail_in = static_cast<uInt>(bytes.size());
    z.next_out = reinterpret_cast<Bytef*>(out.data());
    z.avail_out = static_cast<uInt>(out.size());
    const int rc = deflate(&z, Z_FINISH);
    out.resize(z.total_out);
    deflateEnd(&z);
    if (rc != Z_STREAM_END) throw std::runtime_error("fuzz harness: deflate failed");
    return out;
}

/// `bytes` followed by their CRC-32 (zlib's), little-endian: the trailer of a Bin record.
inline std::vector<std::byte> with_crc32(Input bytes) {
    std::vector<std::byte> out(bytes.begin(), bytes.end());
    const auto crc = static_cast<std::uint32_t>(
        crc32(0, reinterpret_cast<const Bytef*>(bytes.data()), static_cast<uInt>(bytes.size())));
    for (int i = 0; i < 4; ++i) out.push_back(std::byte((crc >> (8 * i)) & 0xff));
    return out;
}

/// When `bytes` end the way a NamedMpk record with a checksum does (a MessagePack uint32: 0xce
/// and four big-endian bytes), the same bytes with that CRC-32 recomputed over everything before
/// its four bytes, so that mutations of the tree reach the decoder; else the bytes unchanged.
inline std::vector<std::byte> with_mpk_checksum(Input bytes) {
    std::vector<std::byte> out(bytes.begin(), bytes.end());
    const std::size_t n = out.size();
    if (n < 5 || out[n - 5] != std::byte{0xce}) return out;
    const auto crc = static_cast<std::uint32_t>(
        crc32(0, reinterpret_cast<const Bytef*>(out.data()), static_cast<uInt>(n - 4)));
    for (int i = 0; i < 4; ++i) out[n - 4 + i] = std::byte((crc >> (8 * (3 - i))) & 0xff);
    return out;
}

}  // namespace ember::fuzz
