#pragma once
// Internal to the PyTorch reader: the zip container torch.save writes (PKZIP with zip64 end
// records, entries stored uncompressed and padded to 64-byte boundaries). Only what reading needs:
// the central directory, stored and deflated entries, CRC checks. Every offset and size read from
// the file is checked against the file before it is used, so a truncated or hostile archive gives
// a FormatError instead of a read past the end or an allocation of a declared size.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "error.hpp"

namespace ember::record::detail::pt {

/// One file of the archive, as its central directory entry describes it.
struct ZipEntry {
    std::string name;                ///< path inside the archive
    std::uint16_t method = 0;        ///< 0 stored, 8 deflated
    std::uint32_t crc = 0;           ///< CRC-32 of the uncompressed bytes
    std::uint64_t compressed = 0;    ///< bytes in the archive
    std::uint64_t size = 0;          ///< bytes once uncompressed
    std::uint64_t local_offset = 0;  ///< offset of the local header
};

/// A zip archive in memory (the bytes must outlive the reader).
class ZipReader {
  public:
    /// Reads the central directory of `bytes`; fails (through `src`) on anything malformed.
    ZipReader(std::span<const std::byte> bytes, const Source& src);

    /// The entries in directory order.
    const std::vector<ZipEntry>& entries() const { return entries_; }
    /// The entry called `name`, or nullptr.
    const ZipEntry* find(std::string_view name) const;
    /// The uncompressed bytes of `e`, CRC checked. Stored entries are a view into the archive;
    /// deflated ones are inflated into `scratch`, which the view then points into.
    std::span<const std::byte> read(const ZipEntry& e, std::vector<std::byte>& scratch) const;

  private:
    std::span<const std::byte> bytes_;
    const Source& src_;
    std::vector<ZipEntry> entries_;
    // Name → index: archives of large models hold thousands of storages.
    std::unordered_map<std::string, std::size_t> index_;
};

}  // namespace ember::record::detail::pt
