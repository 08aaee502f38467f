// Rendezvous by environment, file and TCP. The TCP exchange is one request and one reply per
// connection: the client states {magic, rank, world size}; rank 0 answers {status, length} and
// its bytes. Everything is little-endian on the wire.
#include <ember/collective/rendezvous.hpp>

#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <thread>

#include <ember/tensor/error.hpp>

namespace ember::collective {

namespace {

using Clock = std::chrono::steady_clock;
constexpr char kMagic[8] = {'E', 'M', 'B', 'E', 'R', 'R', 'D', 'V'};
enum Status : std::uint32_t { kOk = 0, kBadWorld = 1, kBadRank = 2, kDuplicate = 3 };
// The most bytes a rendezvous carries (an NCCL id is 128): a peer's length field, or a file, is
// checked against it before anything is allocated, so that a hostile peer cannot make a rank ask
// for 4 GiB.
constexpr std::size_t kMaxBytes = std::size_t{1} << 20;

std::size_t env_number(const char* name, bool required, std::size_t fallback) {
    const char* v = std::getenv(name);
    if (v == nullptr || *v == '\0') {
        EMBER_CHECK(!required, Argument, "ProcessGroupEnv::from_env: ", name, " is not set");
        return fallback;
    }
    std::size_t n = 0;
    const char* end = v + std::strlen(v);
    auto [p, ec] = std::from_chars(v, end, n);
    EMBER_CHECK(ec == std::errc{} && p == end, Argument, "ProcessGroupEnv::from_env: ", name,
                " must be a non-negative integer, got '", v, "'");
    return n;
}

void put_u32(std::byte* p, std::uint32_t v) {
    for (int i = 0; i < 4; ++i) p[i] = std::byte((v >> (8 * i)) & 0xff);
}
std::uint32_t get_u32(const std::byte* p) {
    std::uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v |= std::uint32_t(p[i]) << (8 * i);
    return v;
}

int remaining_ms(Clock::time_point deadline) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    return left > 0 ? int(std::min<long long>(left, 1 << 30)) : 0;
}

// Reads or writes exactly `n` bytes before `deadline`; false on timeout, close or error.
bool transfer(int fd, std::byte* p, std::size_t n, bool write, Clock::time_point deadline) {
    while (n > 0) {
        pollfd pfd{fd, short(write ? POLLOUT : POLLIN), 0};
        if (poll(&pfd, 1, remaining_ms(deadline)) <= 0) return false;
        const ssize_t k = write ? ::send(fd, p, n, MSG_NOSIGNAL) : ::recv(fd, p, n, 0);
        if (k <= 0) {
            if (k < 0 && (errno == EINTR || errno == EAGAIN)) continue;
            return false;
        }
        p += k;
        n -= std::size_t(k);
    }
    return true;
}

struct Fd {
    int fd = -1;
    ~Fd() {
        if (fd >= 0) ::close(fd);
    }
};

}  // namespace

ProcessGroupEnv ProcessGroupEnv::from_env() {
    ProcessGroupEnv e;
    e.world_size = env_number("EMBER_WORLD_SIZE", true, 1);
    e.rank = env_number("EMBER_RANK", true, 0);
    EMBER_CHECK(e.world_size >= 1, Argument,
                "ProcessGroupEnv::from_env: EMBER_WORLD_SIZE must be at least 1, got 0");
    EMBER_CHECK(e.rank < e.world_size, Argument, "ProcessGroupEnv::from_env: EMBER_RANK ", e.rank,
                " is out of range for EMBER_WORLD_SIZE ", e.world_size);
    if (const char* a = std::getenv("EMBER_MASTER_ADDR"); a != nullptr && *a != '\0')
        e.master_addr = a;
    return e;
}

std::string to_hex(std::span<const std::byte> bytes) {
    static constexpr char kDigits[] = "0123456789abcdef";
    std::string s;
    s.reserve(bytes.size() * 2);
    for (std::byte b : bytes) {
        s.push_back(kDigits[std::to_integer<unsigned>(b) >> 4]);
        s.push_back(kDigits[std::to_integer<unsigned>(b) & 15]);
    }
    return s;
}

std::vector<std::byte> from_hex(const std::string& text, const std::string& what) {
    auto digit = [](char c) -> int {
        if (c >= '0' && c <= '9') return c - '0';
        if (c >= 'a' && c <= 'f') return c - 'a' + 10;
        if (c >= 'A' && c <= 'F') return c - 'A' + 10;
        return -1;
    };
    EMBER_CHECK(text.size() % 2 == 0, Format, what, ": hexadecimal text of odd length ",
                text.size());
    std::vector<std::byte> out(text.size() / 2);
    for (std::size_t i = 0; i < out.size(); ++i) {
        const int hi = digit(text[2 * i]), lo = digit(text[2 * i + 1]);
        EMBER_CHECK(hi >= 0 && lo >= 0, Format, what, ": '", text.substr(2 * i, 2), "' at offset ",
                    2 * i, " is not hexadecimal");
        out[i] = std::byte(hi * 16 + lo);
    }
    return out;
}

void write_rendezvous_file(const std::filesystem::path& path, std::span<const std::byte> bytes) {
    const auto tmp = path.string() + ".tmp." + std::to_string(::getpid());
    {
        std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
        out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
        out.flush();
        EMBER_CHECK(out.good(), Format, "write_rendezvous_file: cannot write '", tmp, "'");
    }
    std::error_code ec;
    std::filesystem::rename(tmp, path, ec);
    EMBER_CHECK(!ec, Format, "write_rendezvous_file: cannot rename '", tmp, "' to '", path.string(),
                "': ", ec.message());
}

std::vector<std::byte> wait_rendezvous_file(const std::filesystem::path& path,
                                            std::chrono::milliseconds timeout) {
    const auto deadline = Clock::now() + timeout;
    for (;;) {
        std::ifstream in(path, std::ios::binary);
        if (in) {
            // One byte more than the limit, to tell a file at the limit from a larger one.
            std::vector<std::byte> out(kMaxBytes + 1);
            in.read(reinterpret_cast<char*>(out.data()), std::streamsize(out.size()));
            out.resize(std::size_t(in.gcount()));
            EMBER_CHECK(out.size() <= kMaxBytes, Format, "wait_rendezvous_file: '", path.string(),
                        "' holds more than the ", kMaxBytes, " bytes a rendezvous carries");
            return out;
        }
        EMBER_CHECK(Clock::now() < deadline, Format, "wait_rendezvous_file: '", path.string(),
                    "' did not appear within ", timeout.count(), " ms");
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
}

TcpRendezvousServer::TcpRendezvousServer(unsigned short port) {
    fd_ = ::socket(AF_INET6, SOCK_STREAM, 0);
    const bool v6 = fd_ >= 0;
    if (!v6) fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    EMBER_CHECK(fd_ >= 0, Device, "TcpRendezvousServer: socket(): ", std::strerror(errno));
    int one = 1, zero = 0;
    ::setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    int rc = 0;
    if (v6) {  // both IPv6 and IPv4 clients
        ::setsockopt(fd_, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
        sockaddr_in6 a{};
        a.sin6_family = AF_INET6;
        a.sin6_addr = in6addr_any;
        a.sin6_port = htons(port);
        rc = ::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a);
    } else {
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_ANY);
        a.sin_port = htons(port);
        rc = ::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a);
    }
    if (rc != 0 || ::listen(fd_, 64) != 0) {
        const std::string why = std::strerror(errno);
        ::close(fd_);
        fd_ = -1;
        EMBER_FAIL(Device, "TcpRendezvousServer: bind/listen on port ", port, ": ", why);
    }
    sockaddr_storage got{};
    socklen_t len = sizeof got;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&got), &len);
    port_ = ntohs(got.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&got)->sin6_port
                                            : reinterpret_cast<sockaddr_in*>(&got)->sin_port);
}

TcpRendezvousServer::~TcpRendezvousServer() {
    if (fd_ >= 0) ::close(fd_);
}

void TcpRendezvousServer::serve(std::span<const std::byte> bytes, std::size_t world_size,
                                std::chrono::milliseconds timeout) {
    EMBER_CHECK(bytes.size() <= kMaxBytes, Argument, "TcpRendezvousServer::serve: ", bytes.size(),
                " bytes, more than the ", kMaxBytes, " a rendezvous carries");
    const auto deadline = Clock::now() + timeout;
    std::vector<char> served(world_size, 0);
    std::size_t left = world_size - 1;
    std::string error;
    while (left > 0) {
        pollfd pfd{fd_, POLLIN, 0};
        EMBER_CHECK(poll(&pfd, 1, remaining_ms(deadline)) > 0, Format,
                    "TcpRendezvousServer::serve: ", left, " of ", world_size - 1,
                    " rank(s) did not connect on port ", port_, " within ", timeout.count(), " ms");
        Fd c{::accept(fd_, nullptr, nullptr)};
        if (c.fd < 0) continue;
        std::array<std::byte, 16> hello{};
        if (!transfer(c.fd, hello.data(), hello.size(), false, deadline) ||
            std::memcmp(hello.data(), kMagic, 8) != 0)
            continue;  // not one of ours: ignore it
        const std::size_t rank = get_u32(hello.data() + 8), world = get_u32(hello.data() + 12);
        std::uint32_t status = kOk;
        if (world != world_size) {
            status = kBadWorld;
            error = "rank " + std::to_string(rank) + " expects a world of " +
                    std::to_string(world) + " ranks, rank 0 one of " + std::to_string(world_size);
        } else if (rank == 0 || rank >= world_size) {
            status = kBadRank;
            error = "a client claims rank " + std::to_string(rank) + ", out of range 1.." +
                    std::to_string(world_size - 1);
        } else if (served[rank]) {
            status = kDuplicate;
            error = "two processes claim rank " + std::to_string(rank);
        }
        std::vector<std::byte> reply(8 + (status == kOk ? bytes.size() : 0));
        put_u32(reply.data(), status);
        put_u32(reply.data() + 4, std::uint32_t(status == kOk ? bytes.size() : 0));
        if (status == kOk) std::memcpy(reply.data() + 8, bytes.data(), bytes.size());
        transfer(c.fd, reply.data(), reply.size(), true, deadline);
        EMBER_CHECK(status == kOk, Argument, "TcpRendezvousServer::serve: ", error);
        served[rank] = 1;
        --left;
    }
}

std::vector<std::byte> tcp_rendezvous_fetch(const std::string& address, std::size_t rank,
                                            std::size_t world_size,
                                            std::chrono::milliseconds timeout) {
    const auto colon = address.rfind(':');
    EMBER_CHECK(colon != std::string::npos && colon + 1 < address.size(), Argument,
                "tcp_rendezvous: the address must be host:port, got '", address, "'");
    std::string host = address.substr(0, colon);
    if (host.size() > 2 && host.front() == '[' && host.back() == ']')
        host = host.substr(1, host.size() - 2);
    const std::string port = address.substr(colon + 1);
    const auto deadline = Clock::now() + timeout;
    std::string last = "no attempt";
    while (true) {
        addrinfo hints{};
        hints.ai_family = AF_UNSPEC;
        hints.ai_socktype = SOCK_STREAM;
        addrinfo* found = nullptr;
        const int gai = ::getaddrinfo(host.c_str(), port.c_str(), &hints, &found);
        if (gai != 0) {
            last = std::string("getaddrinfo: ") + ::gai_strerror(gai);
        } else {
            for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
                Fd c{::socket(a->ai_family, a->ai_socktype, a->ai_protocol)};
                if (c.fd < 0) continue;
                if (::connect(c.fd, a->ai_addr, a->ai_addrlen) != 0) {
                    last = std::string("connect: ") + std::strerror(errno);
                    continue;
                }
                std::array<std::byte, 16> hello{};
                std::memcpy(hello.data(), kMagic, 8);
                put_u32(hello.data() + 8, std::uint32_t(rank));
                put_u32(hello.data() + 12, std::uint32_t(world_size));
                std::array<std::byte, 8> head{};
                if (!transfer(c.fd, hello.data(), hello.size(), true, deadline) ||
                    !transfer(c.fd, head.data(), head.size(), false, deadline)) {
                    last = "the connection closed during the exchange";
                    continue;
                }
                const std::uint32_t status = get_u32(head.data());
                ::freeaddrinfo(found);
                found = nullptr;
                EMBER_CHECK(status == kOk, Argument, "tcp_rendezvous: rank 0 at ", address,
                            " refused rank ", rank, " of ", world_size, ": ",
                            status == kBadWorld  ? "it runs another world size"
                            : status == kBadRank ? "the rank is out of range"
                                                 : "another process has this rank");
                const std::size_t length = get_u32(head.data() + 4);
                EMBER_CHECK(length <= kMaxBytes, Format, "tcp_rendezvous: rank 0 at ", address,
                            " announces ", length, " bytes, more than the ", kMaxBytes,
                            " a rendezvous carries");
                std::vector<std::byte> out(length);
                EMBER_CHECK(transfer(c.fd, out.data(), out.size(), false, deadline), Format,
                            "tcp_rendezvous: rank 0 at ", address, " closed the connection");
                return out;
            }
            if (found) ::freeaddrinfo(found);
        }
        EMBER_CHECK(Clock::now() < deadline, Format, "tcp_rendezvous: rank ", rank,
                    " could not reach rank 0 at ", address, " within ", timeout.count(), " ms (",
                    last, ")");
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
}

std::vector<std::byte> tcp_rendezvous(std::span<const std::byte> bytes, std::size_t rank,
                                      std::size_t world_size, const std::string& address,
                                      std::chrono::milliseconds timeout) {
    EMBER_CHECK(rank < world_size, Argument, "tcp_rendezvous: rank ", rank,
                " is out of range for a world of ", world_size);
    if (rank != 0) return tcp_rendezvous_fetch(address, rank, world_size, timeout);
    const auto colon = address.rfind(':');
    EMBER_CHECK(colon != std::string::npos, Argument,
                "tcp_rendezvous: the address must be host:port, got '", address, "'");
    unsigned port = 0;
    const std::string p = address.substr(colon + 1);
    auto [end, ec] = std::from_chars(p.data(), p.data() + p.size(), port);
    EMBER_CHECK(ec == std::errc{} && end == p.data() + p.size() && port <= 65535, Argument,
                "tcp_rendezvous: '", p, "' in '", address, "' is not a port number");
    TcpRendezvousServer server(static_cast<unsigned short>(port));
    server.serve(bytes, world_size, timeout);
    return {bytes.begin(), bytes.end()};
}

}  // namespace ember::collective
