// The rendezvous messages (src/collective/rendezvous.cpp): what a hostile peer can send to each
// side of the TCP exchange, the hexadecimal ids of the environment and the rendezvous file, and
// the EMBER_WORLD_SIZE / EMBER_RANK / EMBER_MASTER_ADDR variables. The first byte picks:
//   0: the rest is hex text (from_hex), and three NUL-separated environment values (from_env);
//   1: rank 0's side: a world size, then up to three hostile connections (a length byte and the
//      bytes each sends), after which the harness connects the real ranks; serve() must finish
//      or refuse, and every real rank served must get rank 0's bytes;
//   2: a rank's side: the rest is rank 0's reply to tcp_rendezvous_fetch (status, length, bytes).
// Everything runs on loopback sockets of this process; closes are resets, so that no TIME_WAIT
// piles up over millions of runs.
#include <ember/collective/rendezvous.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "fuzz.hpp"

namespace {

using namespace std::chrono_literals;

// A socket closed with a reset.
struct Socket {
    int fd = -1;
    explicit Socket(int f) : fd(f) {}
    Socket(Socket&& o) noexcept : fd(o.fd) { o.fd = -1; }
    Socket(const Socket&) = delete;
    ~Socket() {
        if (fd < 0) return;
        linger l{1, 0};
        ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
        ::close(fd);
    }
};

// A connection to `port` on loopback. Millions of runs cycle through the ephemeral ports, and
// the connections ember closes first wait in TIME_WAIT: a connect that finds no free port is
// retried for a while (the machine's trouble, not a finding).
Socket connect_to(unsigned short port) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(port);
    for (int attempt = 0;; ++attempt) {
        Socket s(::socket(AF_INET, SOCK_STREAM, 0));
        if (s.fd < 0) throw std::runtime_error("fuzz harness: socket() failed");
        if (::connect(s.fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) return s;
        if ((errno != EADDRNOTAVAIL && errno != EAGAIN) || attempt == 500)
            throw std::runtime_error(std::string("fuzz harness: connect() failed: ") +
                                     std::strerror(errno));
        std::this_thread::sleep_for(10ms);
    }
}

void send_all(int fd, ember::fuzz::Input bytes) {
    while (!bytes.empty()) {
        const ssize_t k = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
        if (k <= 0) return;  // the other side is gone: what it does with that is under test
        bytes = bytes.subspan(static_cast<std::size_t>(k));
    }
}

// Reads what is there within `ms` milliseconds, up to `n` bytes.
std::vector<std::byte> recv_some(int fd, std::size_t n, int ms) {
    std::vector<std::byte> out;
    std::vector<std::byte> buf(n);
    while (out.size() < n) {
        pollfd p{fd, POLLIN, 0};
        if (::poll(&p, 1, ms) <= 0) break;
        const ssize_t k = ::recv(fd, buf.data(), n - out.size(), 0);
        if (k <= 0) break;
        out.insert(out.end(), buf.begin(), buf.begin() + k);
    }
    return out;
}

std::array<std::byte, 16> hello(std::uint32_t rank, std::uint32_t world) {
    std::array<std::byte, 16> h{};
    const char magic[8] = {'E', 'M', 'B', 'E', 'R', 'R', 'D', 'V'};
    std::memcpy(h.data(), magic, 8);
    for (int i = 0; i < 4; ++i) {
        h[8 + i] = std::byte((rank >> (8 * i)) & 0xff);
        h[12 + i] = std::byte((world >> (8 * i)) & 0xff);
    }
    return h;
}

void text_and_env(ember::fuzz::Input rest) {
    using namespace ember;
    const std::string text(fuzz::as_text(rest));
    fuzz::refused_or_fine([&] {
        const auto bytes = collective::from_hex(text, "fuzz");
        if (collective::to_hex(bytes).size() != text.size())
            throw std::logic_error("fuzz: from_hex and to_hex disagree on the length");
    });
    std::vector<std::string> parts(3);
    std::size_t at = 0;
    for (auto& p : parts) {
        const std::size_t end = std::min(text.find('\0', at), text.size());
        p = text.substr(std::min(at, text.size()), end - std::min(at, text.size()));
        at = end + 1;
    }
    ::setenv("EMBER_WORLD_SIZE", parts[0].c_str(), 1);
    ::setenv("EMBER_RANK", parts[1].c_str(), 1);
    ::setenv("EMBER_MASTER_ADDR", parts[2].c_str(), 1);
    fuzz::refused_or_fine([&] {
        const auto env = collective::ProcessGroupEnv::from_env();
        if (env.rank >= env.world_size) throw std::logic_error("fuzz: from_env took rank >= world");
    });
}

void rank0_side(ember::fuzz::Reader& in) {
    using namespace ember;
    const std::uint32_t world = 2 + in.byte() % 3;
    const std::vector<std::byte> id = {std::byte{0x5a}, std::byte{0x01}, std::byte{0xff}};
    fuzz::refused_or_fine([&] {
        collective::TcpRendezvousServer server(0);
        std::vector<Socket> hostile;
        for (int n = in.byte() % 4; n > 0; --n) {
            hostile.push_back(connect_to(server.port()));
            send_all(hostile.back().fd, in.take(in.byte()));
            ::shutdown(hostile.back().fd, SHUT_WR);
        }
        std::vector<Socket> ranks;
        for (std::uint32_t r = 1; r < world; ++r) {
            ranks.push_back(connect_to(server.port()));
            send_all(ranks.back().fd, hello(r, world));
            ::shutdown(ranks.back().fd, SHUT_WR);
        }
        server.serve(id, world, 2s);
        // Served without refusing: every real rank it answered got status 0 and the bytes (a
        // hostile connection may have taken a rank first, leaving a real one unanswered).
        for (const Socket& s : ranks) {
            const auto reply = recv_some(s.fd, 8 + id.size(), 100);
            if (!reply.empty() && (reply.size() != 8 + id.size() || reply[0] != std::byte{0} ||
                                   reply[4] != std::byte(id.size()) || reply[8] != id[0]))
                throw std::logic_error("fuzz: serve() returned, but a rank got a bad reply");
        }
    });
}

void rank1_side(ember::fuzz::Input reply) {
    using namespace ember;
    // A fake rank 0 on a fresh port: takes one hello, answers with the fuzzer's bytes, resets.
    Socket listener(::socket(AF_INET, SOCK_STREAM, 0));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (listener.fd < 0 || ::bind(listener.fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        ::listen(listener.fd, 8) != 0 ||
        ::getsockname(listener.fd, reinterpret_cast<sockaddr*>(&a), &len) != 0)
        throw std::runtime_error("fuzz harness: cannot listen on loopback");
    std::thread rank0([&] {
        pollfd p{listener.fd, POLLIN, 0};
        if (::poll(&p, 1, 2000) <= 0) return;
        Socket c(::accept(listener.fd, nullptr, nullptr));
        if (c.fd < 0) return;
        (void)recv_some(c.fd, 16, 1000);
        send_all(c.fd, reply);
        ::shutdown(c.fd, SHUT_WR);
        (void)recv_some(c.fd, 1, 300);  // let the client read before the reset
    });
    fuzz::refused_or_fine([&] {
        const auto got = collective::tcp_rendezvous_fetch(
            "127.0.0.1:" + std::to_string(ntohs(a.sin_port)), 1, 2, 150ms);
        std::size_t announced = 0;
        for (int i = 3; i >= 0 && reply.size() >= 8; --i)
            announced = (announced << 8) | std::to_integer<std::size_t>(reply[4 + i]);
        if (reply.size() < 8 || got.size() != announced || announced > reply.size() - 8)
            throw std::logic_error("fuzz: tcp_rendezvous_fetch returned what rank 0 did not send");
    });
    rank0.join();
}

}  // namespace

EMBER_FUZZ_TARGET(rendezvous) {
    ember::fuzz::Reader in(input);
    switch (in.byte() % 3) {
        case 0:
            text_and_env(in.rest());
            break;
        case 1:
            rank0_side(in);
            break;
        default:
            rank1_side(in.rest());
            break;
    }
}
