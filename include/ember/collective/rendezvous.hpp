#pragma once
// Rendezvous: how the processes of a multi-process group learn who they are and share the few
// bytes that set up a communicator (NCCL's unique id), before any collective exists. Rank 0
// makes the bytes and hands them to the others through one of:
//   - the environment: every process reads them from a variable (hex), set by the launcher;
//   - a file on a file system all ranks see: rank 0 writes it atomically, the others wait for it;
//   - TCP: rank 0 listens on EMBER_MASTER_ADDR (host:port), the others connect and fetch them.
// The process's place comes from EMBER_WORLD_SIZE and EMBER_RANK (docs/multi-device.md). A
// rendezvous carries at most 1 MiB: larger files and larger lengths announced by a peer are
// refused before anything is allocated.
#include <chrono>
#include <cstddef>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "../export.hpp"

namespace ember::collective {

/// This process's place in a multi-process group, from the environment.
struct EMBER_API ProcessGroupEnv {
    std::size_t world_size = 1;              ///< EMBER_WORLD_SIZE: number of ranks
    std::size_t rank = 0;                    ///< EMBER_RANK: this process's rank
    std::optional<std::string> master_addr;  ///< EMBER_MASTER_ADDR: "host:port" of rank 0

    /// Reads EMBER_WORLD_SIZE, EMBER_RANK (both required) and EMBER_MASTER_ADDR (optional).
    /// ArgumentError naming the variable when one is missing or not a number, or when the rank
    /// is not below the world size.
    static ProcessGroupEnv from_env();
};

/// Lower-case hexadecimal of `bytes` (for environment variables and files).
EMBER_API std::string to_hex(std::span<const std::byte> bytes);
/// The bytes of hexadecimal text; FormatError naming `what` when it is not hex of even length.
EMBER_API std::vector<std::byte> from_hex(const std::string& text, const std::string& what);

/// Writes `bytes` to `path` through a temporary name and a rename, so that a reader never sees
/// a partial file.
EMBER_API void write_rendezvous_file(const std::filesystem::path& path,
                                     std::span<const std::byte> bytes);
/// Waits until `path` exists (polling) and returns its bytes; FormatError when it has not
/// appeared after `timeout`.
EMBER_API std::vector<std::byte> wait_rendezvous_file(const std::filesystem::path& path,
                                                      std::chrono::milliseconds timeout);

/// Rank 0's side of a TCP rendezvous: listens on a port, then hands its bytes to every other
/// rank as it connects.
class EMBER_API TcpRendezvousServer {
  public:
    /// Listens on `port` of every interface (0: a free port the system picks; see port()).
    /// DeviceError naming the call when the port cannot be bound.
    explicit TcpRendezvousServer(unsigned short port);
    ~TcpRendezvousServer();
    TcpRendezvousServer(const TcpRendezvousServer&) = delete;
    TcpRendezvousServer& operator=(const TcpRendezvousServer&) = delete;

    /// The port it listens on.
    unsigned short port() const { return port_; }
    /// Accepts ranks 1..world_size-1 (each once) and sends each `bytes`. A client that states
    /// another world size, a rank out of range or a rank already served is answered with an
    /// error and the call throws ArgumentError naming it; FormatError after `timeout` without
    /// all ranks.
    void serve(std::span<const std::byte> bytes, std::size_t world_size,
               std::chrono::milliseconds timeout);

  private:
    int fd_ = -1;
    unsigned short port_ = 0;
};

/// A non-zero rank's side: connects to `address` ("host:port"), retrying until `timeout`, and
/// returns rank 0's bytes. ArgumentError when rank 0 refuses this rank (world size or rank
/// mismatch), FormatError when it cannot be reached in time.
EMBER_API std::vector<std::byte> tcp_rendezvous_fetch(const std::string& address, std::size_t rank,
                                                      std::size_t world_size,
                                                      std::chrono::milliseconds timeout);

/// Rank 0's `bytes` on every rank through TCP at `address`: rank 0 listens on its port and
/// returns `bytes`; the others connect and return what rank 0 sent.
EMBER_API std::vector<std::byte> tcp_rendezvous(std::span<const std::byte> bytes, std::size_t rank,
                                                std::size_t world_size, const std::string& address,
                                                std::chrono::milliseconds timeout);

}  // namespace ember::collective
