// Raw mode, the alternate screen and signal handling for the dashboard. The signal handlers
// only touch the globals below, with async-signal-safe calls (write, tcsetattr, sigaction,
// raise) and lock-free atomics.
#include "terminal.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "ember/tensor/error.hpp"

namespace ember::train::detail {
namespace {

constexpr char kEnter[] = "\x1b[?1049h\x1b[?25l\x1b[2J";
constexpr char kLeave[] = "\x1b[0m\x1b[?25h\x1b[?1049l";

// The interrupting signals (graceful stop, then the previous action) and the fatal ones (the
// terminal is restored before the previous action).
constexpr int kStopSignals[] = {SIGINT, SIGTERM};
constexpr int kFatalSignals[] = {SIGHUP, SIGQUIT, SIGABRT};
constexpr int kAllSignals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGABRT, SIGWINCH};
constexpr int kMaxSignal = 65;

std::atomic<bool> g_open{false};      // a session exists
std::atomic<bool> g_taken{false};     // the terminal is in raw mode / on the alternate screen
std::atomic<int> g_stop_requests{0};  // SIGINT/SIGTERM seen in this session
int g_tty_fd = -1, g_out_fd = -1, g_wake_fd = -1;
bool g_have_termios = false;
termios g_saved{};
Interrupter* g_interrupter = nullptr;
struct sigaction g_previous[kMaxSignal];

static_assert(std::atomic<bool>::is_always_lock_free && std::atomic<int>::is_always_lock_free,
              "the signal handlers need lock-free atomics");

// Gives the terminal back; safe in a signal handler and when called twice.
void restore_terminal() {
    if (!g_taken.exchange(false)) return;
    if (g_have_termios) tcsetattr(g_tty_fd, TCSANOW, &g_saved);
    const ssize_t n = ::write(g_out_fd, kLeave, sizeof kLeave - 1);
    (void)n;
}

// Puts back the handler that was there before the session, then raises `sig` again so that it
// runs (a default action that ends the process ends it once this handler returns).
void pass_on(int sig) {
    sigaction(sig, &g_previous[sig], nullptr);
    raise(sig);
}

void on_stop_signal(int sig) {
    const int saved_errno = errno;
    if (g_stop_requests.fetch_add(1) == 0) {
        if (g_interrupter) g_interrupter->stop_by_signal(sig);
        const char c = 'I';
        const ssize_t n = ::write(g_wake_fd, &c, 1);
        (void)n;
    } else {  // asked twice: the user means it
        restore_terminal();
        pass_on(sig);
    }
    errno = saved_errno;
}

void on_fatal_signal(int sig) {
    const int saved_errno = errno;
    restore_terminal();
    pass_on(sig);
    errno = saved_errno;
}

void on_resize(int) {
    const int saved_errno = errno;
    const char c = 'W';
    const ssize_t n = ::write(g_wake_fd, &c, 1);
    (void)n;
    errno = saved_errno;
}

void install(int sig, void (*handler)(int)) {
    struct sigaction sa {};
    sa.sa_handler = handler;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(sig, &sa, &g_previous[sig]);
}

}  // namespace

TerminalSession::TerminalSession(int out_fd, const Interrupter& interrupter)
    : out_fd_(out_fd), interrupter_(interrupter) {
    EMBER_CHECK(!g_open.exchange(true), Device,
                "TuiRenderer: another dashboard already holds the terminal");
    if (pipe2(wake_, O_CLOEXEC | O_NONBLOCK) != 0) {
        const int err = errno;
        g_open = false;
        EMBER_FAIL(Device, "TuiRenderer: cannot create the wake pipe: ", std::strerror(err));
    }
    if (isatty(STDIN_FILENO)) {
        in_fd_ = STDIN_FILENO;
    } else {
        in_fd_ = ::open("/dev/tty", O_RDWR | O_CLOEXEC | O_NOCTTY);
        own_in_fd_ = in_fd_ >= 0;
    }
    g_tty_fd = in_fd_;
    g_out_fd = out_fd_;
    g_wake_fd = wake_[1];
    g_interrupter = &interrupter_;
    g_stop_requests = 0;
    g_have_termios = in_fd_ >= 0 && tcgetattr(in_fd_, &g_saved) == 0;
    if (g_have_termios) {
        termios raw = g_saved;
        // No line editing or echo; Ctrl-C arrives as a key (ISIG off), so it stops the run
        // gracefully even if someone else handles SIGINT. Output processing stays on.
        raw.c_lflag &= ~static_cast<tcflag_t>(ICANON | ECHO | ISIG | IEXTEN);
        raw.c_iflag &= ~static_cast<tcflag_t>(IXON | ICRNL | BRKINT | INPCK | ISTRIP);
        raw.c_cc[VMIN] = 0;
        raw.c_cc[VTIME] = 0;
        tcsetattr(in_fd_, TCSANOW, &raw);
    }
    static const bool at_exit = (std::atexit(restore_terminal), true);
    (void)at_exit;
    for (int sig : kStopSignals) install(sig, on_stop_signal);
    for (int sig : kFatalSignals) install(sig, on_fatal_signal);
    install(SIGWINCH, on_resize);
    g_taken = true;
    write_all(kEnter);
}

TerminalSession::~TerminalSession() {
    restore();
    g_wake_fd = -1;
    g_interrupter = nullptr;
    ::close(wake_[0]);
    ::close(wake_[1]);
    if (own_in_fd_) ::close(in_fd_);
    g_open = false;
}

void TerminalSession::restore() {
    if (restored_) return;
    restored_ = true;
    restore_terminal();
    for (int sig : kAllSignals) sigaction(sig, &g_previous[sig], nullptr);
}

void TerminalSession::wake(Wakeup what) {
    const char c = what == kWakeResize ? 'W' : what == kWakeInterrupt ? 'I' : 'Q';
    const ssize_t n = ::write(wake_[1], &c, 1);
    (void)n;  // a full pipe already holds a wake-up
}

int TerminalSession::drain_wakeups() {
    int bits = 0;
    char buf[64];
    ssize_t n;
    while ((n = ::read(wake_[0], buf, sizeof buf)) > 0)
        for (ssize_t i = 0; i < n; ++i)
            bits |= buf[i] == 'W' ? kWakeResize : buf[i] == 'I' ? kWakeInterrupt : kWakeQuit;
    return bits;
}

std::pair<int, int> TerminalSession::size() const {
    winsize ws{};
    if (ioctl(out_fd_, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0 && ws.ws_row > 0)
        return {ws.ws_col, ws.ws_row};
    return {80, 24};
}

void TerminalSession::write_all(std::string_view bytes) const {
    while (!bytes.empty()) {
        const ssize_t n = ::write(out_fd_, bytes.data(), bytes.size());
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return;  // a closed terminal: nothing left to show things on
        bytes.remove_prefix(static_cast<std::size_t>(n));
    }
}

}  // namespace ember::train::detail
