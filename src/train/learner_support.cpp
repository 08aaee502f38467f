// The Learner's non-template helpers: SIGINT handling, epoch seeds, early stopping, summaries.
#include <signal.h>
#include <atomic>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <iomanip>
#include <sstream>

#include <ember/train/detail/learner_support.hpp>

namespace ember::train::detail {

namespace {

using SigAction = struct sigaction;

// The interrupter SIGINT stops: a pointer read by the handler, which may only touch lock-free
// atomics (Interrupter::stop is one relaxed store to an atomic<bool>).
std::atomic<const Interrupter*> g_active{nullptr};

extern "C" void on_sigint(int sig) {
    const Interrupter* i = g_active.load();
    if (i == nullptr || i->should_stop()) {
        // A second Ctrl-C (or none to tell): the default action, so a stuck run still dies.
        std::signal(sig, SIG_DFL);
        std::raise(sig);
        return;
    }
    const_cast<Interrupter*>(i)->stop_by_signal(sig);
}

}  // namespace

SigintGuard::SigintGuard(const Interrupter& interrupter)
    : interrupter_(interrupter), previous_action_(new SigAction{}) {
    outer_ = g_active.exchange(&interrupter_);
    SigAction act{};
    act.sa_handler = on_sigint;
    sigemptyset(&act.sa_mask);
    act.sa_flags = SA_RESTART;
    sigaction(SIGINT, &act, static_cast<SigAction*>(previous_action_));
}

SigintGuard::~SigintGuard() {
    auto* prev = static_cast<SigAction*>(previous_action_);
    sigaction(SIGINT, prev, nullptr);
    g_active.store(outer_);
    delete prev;
}

std::uint64_t epoch_seed(std::uint64_t seed, std::size_t epoch, Split split) {
    auto mix = [](std::uint64_t z) {
        z += 0x9e3779b97f4a7c15ull;
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
    };
    return mix(mix(mix(seed) ^ std::uint64_t(epoch)) ^ (split == Split::Train ? 1u : 2u));
}

bool EarlyStopper::update(std::size_t epoch, double value) {
    const bool better = !best_ || (direction_ == Direction::Lowest ? value < *best_ - min_delta_
                                                                   : value > *best_ + min_delta_);
    if (better) {
        best_ = value;
        best_epoch_ = epoch;
        return false;
    }
    return epoch - best_epoch_ >= patience_;
}

std::string format_summary(const MetricHistory& history, std::size_t epochs_done) {
    std::ostringstream os;
    os << "Learner summary (" << epochs_done << " epochs)\n";
    os << "| Split | Metric | Min. | Epoch | Max. | Epoch |\n|---|---|---|---|---|---|\n";
    os << std::setprecision(6);
    for (const auto& [split, metrics] : history) {
        for (const auto& [name, values] : metrics) {
            std::size_t lo = 0, hi = 0;
            for (std::size_t i = 0; i < values.size(); ++i) {
                if (std::isnan(values[i])) continue;
                if (lo == 0 || values[i] < values[lo - 1]) lo = i + 1;
                if (hi == 0 || values[i] > values[hi - 1]) hi = i + 1;
            }
            if (lo == 0) continue;
            os << "| " << (split == Split::Train ? "Train" : "Valid") << " | " << name << " | "
               << values[lo - 1] << " | " << lo << " | " << values[hi - 1] << " | " << hi << " |\n";
        }
    }
    return os.str();
}

std::string format_epoch(const std::map<std::string, std::vector<double>>& split_history,
                         std::size_t epoch) {
    std::ostringstream os;
    os << std::setprecision(6);
    bool first = true;
    for (const auto& [name, values] : split_history) {
        if (epoch > values.size() || std::isnan(values[epoch - 1])) continue;
        os << (first ? "" : ", ") << name << ' ' << values[epoch - 1];
        first = false;
    }
    return first ? "-" : os.str();
}

}  // namespace ember::train::detail
