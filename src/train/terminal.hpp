#pragma once
// The terminal as the dashboard takes it (private to src/train): raw mode on the controlling
// terminal, the alternate screen, a self-pipe that signal handlers write to, and a restore
// that is safe to call from a signal handler, at exit and more than once.
#include <string_view>
#include <utility>

#include "ember/train/renderer.hpp"

namespace ember::train::detail {

/// Bits that drain_wakeups reports.
enum Wakeup : int { kWakeResize = 1, kWakeInterrupt = 2, kWakeQuit = 4 };

/// The terminal, taken for as long as the object lives. Signals are process-wide, so only one
/// session may be open at a time.
class TerminalSession {
  public:
    /// Takes the terminal behind `out_fd`: keys come from standard input when it is a terminal,
    /// otherwise from /dev/tty (no keys when neither opens). SIGINT and SIGTERM ask
    /// `interrupter` to stop (the second one runs the signal's previous action); SIGHUP,
    /// SIGQUIT and SIGABRT restore the terminal before their previous action. Throws
    /// ember::Error (Device) when another session is open or the wake pipe cannot be made.
    TerminalSession(int out_fd, const Interrupter& interrupter);
    ~TerminalSession();
    TerminalSession(const TerminalSession&) = delete;
    TerminalSession& operator=(const TerminalSession&) = delete;

    /// Gives the terminal back (cooked mode, normal screen, visible cursor, signal handlers
    /// of before); later calls do nothing.
    void restore();
    /// The descriptor keys arrive on, -1 for none.
    int input_fd() const { return in_fd_; }
    /// The descriptor that becomes readable when a signal or wake() wants the UI thread.
    int wake_fd() const { return wake_[0]; }
    /// Wakes the UI thread with `what` (a Wakeup bit).
    void wake(Wakeup what);
    /// Reads the pending wake-ups, as Wakeup bits.
    int drain_wakeups();
    /// The terminal's size as (columns, rows), 80x24 when unknown.
    std::pair<int, int> size() const;
    /// Writes all of `bytes` to the terminal (retrying short writes).
    void write_all(std::string_view bytes) const;

  private:
    int out_fd_;
    int in_fd_ = -1;
    bool own_in_fd_ = false;
    int wake_[2] = {-1, -1};
    Interrupter interrupter_;  // the copy the signal handlers reach
    bool restored_ = false;
};

}  // namespace ember::train::detail
