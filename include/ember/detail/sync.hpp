#pragma once
// Mutual exclusion and one-time initialisation for ember's internals. Firmware builds
// (EMBER_FREESTANDING) run on one thread and their C++ library may have no std::mutex, so
// there both are plain, non-locking stand-ins.
#if !EMBER_FREESTANDING
#include <mutex>
#endif

namespace ember::detail {

#if EMBER_FREESTANDING
/// No other thread to exclude.
struct Mutex {
    void lock() {}
    void unlock() {}
};
/// Whether the function of call_once has run.
struct OnceFlag {
    bool done = false;
};
/// Runs `f` the first time it is called with `flag`.
template <typename F>
void call_once(OnceFlag& flag, F&& f) {
    if (!flag.done) {
        f();
        flag.done = true;
    }
}
#else
using Mutex = std::mutex;
using OnceFlag = std::once_flag;
using std::call_once;
#endif

/// Holds a mutex for a scope (std::lock_guard, which freestanding libraries may lack).
template <typename M>
class LockGuard {
  public:
    explicit LockGuard(M& m) : m_(m) { m_.lock(); }
    ~LockGuard() { m_.unlock(); }
    LockGuard(const LockGuard&) = delete;
    LockGuard& operator=(const LockGuard&) = delete;

  private:
    M& m_;
};

}  // namespace ember::detail
