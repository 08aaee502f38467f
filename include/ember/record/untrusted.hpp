#pragma once
// Reading files that may be hostile (docs/security.md): the limits on what one file may make
// ember allocate, the rule that what ember reads is a regular file, and the escaping of bytes
// from a file before they reach an error message.
//
// Every reader of records, safetensors, torch.save files, configs and IDX files goes through
// these: a compressed file cannot inflate past the limits, a .pt file's repeated views cannot
// add up past them, /dev/zero or a FIFO is refused before a byte is read, and a name read from
// a file cannot put terminal escapes or newlines into a message.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#if !EMBER_FREESTANDING
#include <filesystem>
#include <vector>
#endif

#include "../export.hpp"

namespace ember::record {

/// What one file may make ember allocate while reading it. The defaults fit real models
/// (checkpoints of tens of GB, Fashion-MNIST's IDX files) and refuse decompression bombs; the
/// environment variables named below change them for a process, set_read_limits() in code.
struct EMBER_API ReadLimits {
    /// The most bytes one file may produce: its size as read, its decompressed size, or the
    /// bytes of the tensors made from it (a .pt view repeating elements counts each time).
    /// EMBER_MAX_READ_BYTES (suffixes K, M, G, T allowed); default 16 GiB.
    std::uint64_t max_bytes = std::uint64_t{16} << 30;
    /// Above `expansion_floor`, the most bytes decoded per byte stored (gzip, deflate, .pt views
    /// of shared or stride-0 storage). Real weights compress less than 2:1, MNIST's images 5:1;
    /// a decompression bomb reaches 1000:1. EMBER_MAX_EXPANSION; default 64.
    std::uint64_t max_expansion = 64;
    /// Decoded sizes up to this pass whatever their expansion (a zero-filled model compresses
    /// very well). EMBER_EXPANSION_FLOOR (suffixes allowed); default 256 MiB.
    std::uint64_t expansion_floor = std::uint64_t{256} << 20;
    /// Whether record checksums (Bin's, NamedMpk's) are verified on load. EMBER_VERIFY_CHECKSUMS
    /// = 0 skips them; default on.
    bool verify_checksums = true;

    /// The most bytes `stored` bytes may decode into under these limits.
    std::uint64_t max_decoded(std::uint64_t stored) const;
};

/// The limits in force: the last set_read_limits(), else the defaults with the environment
/// variables applied (read once; ArgumentError naming a variable that does not parse).
EMBER_API ReadLimits read_limits();
/// Replaces the limits for the whole process; returns the previous ones.
EMBER_API ReadLimits set_read_limits(const ReadLimits& limits);

/// Sets the limits while alive, restoring the previous ones after (tests, one-off loads).
class ScopedReadLimits {
  public:
    /// Installs `limits`.
    explicit ScopedReadLimits(const ReadLimits& limits) : previous_(set_read_limits(limits)) {}
    /// Restores the previous limits.
    ~ScopedReadLimits() { set_read_limits(previous_); }
    ScopedReadLimits(const ScopedReadLimits&) = delete;
    ScopedReadLimits& operator=(const ScopedReadLimits&) = delete;

  private:
    ReadLimits previous_;
};

/// `bytes` made safe to print in a message: printable ASCII and valid UTF-8 letters as they
/// are; control characters, DEL, C1 controls and invalid UTF-8 as \xNN (\n, \t, \r and a
/// backslash spelled so, the backslash doubled). At most `max_bytes` of the input are shown,
/// then "...". Every error message that quotes a name or a string read from a file goes through it.
EMBER_API std::string printable(std::string_view bytes, std::size_t max_bytes = 200);

namespace detail {

/// The defaults with the EMBER_MAX_READ_BYTES, EMBER_MAX_EXPANSION, EMBER_EXPANSION_FLOOR and
/// EMBER_VERIFY_CHECKSUMS variables applied, read now (read_limits() reads them once).
/// ArgumentError naming a variable that does not parse.
ReadLimits read_limits_from_environment();

/// Throws FormatError "<source>: <what> would decode to <decoded> bytes from <stored> stored
/// ones, more than ..." when `decoded` exceeds read_limits() for `stored` bytes: called before
/// anything of that size is allocated.
EMBER_API void check_decoded_size(std::uint64_t decoded, std::uint64_t stored,
                                  std::string_view what, std::string_view source);

#if !EMBER_FREESTANDING
/// A regular file opened for reading. Opening never blocks (O_NONBLOCK until the type is
/// known): a FIFO, a device such as /dev/zero, a socket or a directory is refused with a
/// FormatError naming the path and `what` it should hold.
class EMBER_API RegularFile {
  public:
    /// Opens `path`; FormatError when it is missing, unreadable or not a regular file.
    RegularFile(const std::filesystem::path& path, std::string_view what);
    ~RegularFile();
    RegularFile(const RegularFile&) = delete;
    RegularFile& operator=(const RegularFile&) = delete;

    /// The file descriptor (still owned by this object).
    int fd() const { return fd_; }
    /// The file's size when it was opened.
    std::uint64_t size() const { return size_; }
    /// Gives up ownership of the descriptor (for gzdopen and the like).
    int release();
    /// All its bytes (at most read_limits().max_bytes, checked before allocating).
    std::vector<std::byte> read_all();

  private:
    std::string name_;
    int fd_ = -1;
    std::uint64_t size_ = 0;
};
#endif

}  // namespace detail
}  // namespace ember::record
