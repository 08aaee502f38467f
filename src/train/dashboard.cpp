// TuiRenderer: the Learner's thread feeds the state; a UI thread reads keys and redraws at
// most every min_redraw_ms (and once a second for the clocks).
#include "ember/train/dashboard.hpp"

#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "ember/tensor/error.hpp"
#include "ember/train/detail/dashboard.hpp"
#include "terminal.hpp"

namespace ember::train {

using Clock = std::chrono::steady_clock;

struct TuiRenderer::Impl {
    Interrupter interrupter;
    TuiOptions options;

    std::mutex mu;  // guards everything below but `session`, `ui` and `quit`
    detail::DashboardState state;
    std::vector<MetricEntry> pending[2];      // a split's metrics waiting for its progress
    std::size_t iterations_hint[2] = {0, 0};  // iterations of the split's last epoch
    std::size_t last_iteration[2] = {0, 0};
    Clock::time_point run_start, epoch_start;
    std::size_t epoch_seen[2] = {0, 0};
    bool dirty = true;

    std::unique_ptr<detail::TerminalSession> session;
    std::thread ui;
    std::atomic<bool> quit{false};

    static int slot(Split s) { return s == Split::Train ? 0 : 1; }

    // Takes the terminal on first use (and again after on_run_end, for a second run).
    void start() {
        if (session) return;
        session = std::make_unique<detail::TerminalSession>(STDOUT_FILENO, interrupter);
        run_start = epoch_start = Clock::now();
        quit = false;
        ui = std::thread([this] { loop(); });
    }

    void stop_ui() {
        if (!session) return;
        quit = true;
        session->wake(detail::kWakeQuit);
        if (ui.joinable()) ui.join();
    }

    void update(Split split, const MetricEntry& entry) {
        std::lock_guard lock(mu);
        pending[slot(split)].push_back(entry);
    }

    void render(Split split, const TrainingProgress& p) {
        std::lock_guard lock(mu);
        const int k = slot(split);
        if (split != state.active || p.epoch != epoch_seen[k]) epoch_start = Clock::now();
        epoch_seen[k] = p.epoch;
        state.active = split;
        (split == Split::Train ? state.train_progress : state.valid_progress) = p;
        const double x = detail::run_position(p, iterations_hint[k]);
        for (const MetricEntry& e : pending[k]) state.update(split, e, x);
        pending[k].clear();
        last_iteration[k] = p.iteration;
        dirty = true;
    }

    void handle(detail::Key key) {
        const std::size_t n = state.numeric_metrics().size();
        switch (key) {
            case detail::Key::Right:
                if (n > 0) state.selected = (state.selected % n + 1) % n;
                break;
            case detail::Key::Left:
                if (n > 0) state.selected = (state.selected % n + n - 1) % n;
                break;
            case detail::Key::Up:
            case detail::Key::Down:
                state.view = state.view == detail::ChartView::Iterations
                                 ? detail::ChartView::Epochs
                                 : detail::ChartView::Iterations;
                break;
            case detail::Key::Quit:
                interrupter.stop();
                break;
            // Through the signal path, so a second Ctrl-C ends the process as usual.
            case detail::Key::CtrlC:
                raise(SIGINT);
                break;
            case detail::Key::Other:
                return;
        }
        dirty = true;
    }

    void draw(bool clear) {
        const auto [w, h] = session->size();
        std::vector<std::string> lines;
        {
            std::lock_guard lock(mu);
            const auto now = Clock::now();
            state.elapsed = std::chrono::duration<double>(now - run_start).count();
            state.epoch_elapsed = std::chrono::duration<double>(now - epoch_start).count();
            state.stopping = interrupter.should_stop();
            state.color = options.color;
            lines = detail::compose_frame(state, w, h);
            dirty = false;
        }
        std::string out = clear ? "\x1b[2J" : "";
        for (std::size_t i = 0; i < lines.size(); ++i)
            out += "\x1b[" + std::to_string(i + 1) + ";1H" + lines[i];
        session->write_all(out);
    }

    void loop() {
        std::string input;
        auto last_draw = Clock::now() - std::chrono::hours(1);
        const auto min_gap = std::chrono::milliseconds(std::max(1, options.min_redraw_ms));
        bool clear = false, was_stopping = false;
        while (!quit) {
            const auto since = Clock::now() - last_draw;
            bool want;
            {
                std::lock_guard lock(mu);
                want = dirty || clear || interrupter.should_stop() != was_stopping;
            }
            auto wait = want ? min_gap - since : std::chrono::seconds(1) - since;
            if (!input.empty())
                wait = std::min<Clock::duration>(wait, std::chrono::milliseconds(50));
            const int timeout = static_cast<int>(std::max<long long>(
                0, std::chrono::duration_cast<std::chrono::milliseconds>(wait).count()));
            pollfd fds[2] = {{session->wake_fd(), POLLIN, 0}, {session->input_fd(), POLLIN, 0}};
            const int ready = ::poll(fds, session->input_fd() >= 0 ? 2 : 1, timeout);
            if (ready > 0 && (fds[0].revents & POLLIN)) {
                const int bits = session->drain_wakeups();
                if (bits & detail::kWakeResize) clear = true;
                if (bits & detail::kWakeQuit) break;
            }
            bool got = false;
            if (ready > 0 && session->input_fd() >= 0 && (fds[1].revents & POLLIN)) {
                char buf[256];
                const ssize_t n = ::read(session->input_fd(), buf, sizeof buf);
                if (n > 0) input.append(buf, static_cast<std::size_t>(n)), got = true;
            }
            if (!input.empty()) {
                // A lone ESC with nothing after it for a poll round is the Escape key itself.
                const auto keys = detail::decode_keys(input, !got);
                std::lock_guard lock(mu);
                for (detail::Key k : keys) handle(k);
            }
            const auto now = Clock::now();
            {
                std::lock_guard lock(mu);
                want = dirty || clear || interrupter.should_stop() != was_stopping;
            }
            if ((want && now - last_draw >= min_gap) ||
                now - last_draw >= std::chrono::seconds(1)) {
                was_stopping = interrupter.should_stop();
                draw(clear);
                clear = false;
                last_draw = now;
            }
        }
    }

    // The last values, printed on the normal screen once the dashboard is gone.
    std::string summary() {
        std::lock_guard lock(mu);
        std::string out;
        for (const std::string& name : state.metric_order) {
            for (Split s : {Split::Train, Split::Valid}) {
                const auto& m = s == Split::Train ? state.train : state.valid;
                auto it = m.find(name);
                if (it == m.end()) continue;
                out += (s == Split::Train ? "[train] " : "[valid] ") + name + ": " +
                       it->second.formatted + "\n";
            }
        }
        if (interrupter.should_stop())
            out += "training stopped on request; resume it from the last checkpoint\n";
        return out;
    }
};

TuiRenderer::TuiRenderer(Interrupter interrupter, TuiOptions options)
    : impl_(std::make_unique<Impl>()) {
    EMBER_CHECK(isatty(STDOUT_FILENO), Device,
                "TuiRenderer: standard output is not a terminal (use a plain renderer, or "
                "make_default_renderer)");
    EMBER_CHECK(options.min_redraw_ms > 0, Argument,
                "TuiRenderer: min_redraw_ms must be positive, got ", options.min_redraw_ms);
    impl_->interrupter = std::move(interrupter);
    impl_->options = options;
    // https://no-color.org: a NO_COLOR that is set and not empty turns colours off.
    if (const char* no_color = std::getenv("NO_COLOR"); no_color && *no_color)
        impl_->options.color = false;
}

TuiRenderer::~TuiRenderer() {
    impl_->stop_ui();
    impl_->session.reset();
}

void TuiRenderer::update_train(const MetricEntry& entry) {
    impl_->start();
    impl_->update(Split::Train, entry);
}

void TuiRenderer::update_valid(const MetricEntry& entry) {
    impl_->start();
    impl_->update(Split::Valid, entry);
}

void TuiRenderer::render_train(const TrainingProgress& progress) {
    impl_->start();
    impl_->render(Split::Train, progress);
}

void TuiRenderer::render_valid(const TrainingProgress& progress) {
    impl_->start();
    impl_->render(Split::Valid, progress);
}

void TuiRenderer::on_epoch_end(Split split, std::size_t epoch) {
    std::lock_guard lock(impl_->mu);
    const int k = Impl::slot(split);
    impl_->iterations_hint[k] = impl_->last_iteration[k];
    impl_->state.end_epoch(split, epoch);
    impl_->dirty = true;
}

void TuiRenderer::on_run_end() {
    if (!impl_->session) return;
    impl_->stop_ui();
    impl_->session.reset();
    const std::string text = impl_->summary();
    const ssize_t n = ::write(STDOUT_FILENO, text.data(), text.size());
    (void)n;
}

std::unique_ptr<MetricsRenderer> make_default_renderer(
    const Interrupter& interrupter,
    const std::function<std::unique_ptr<MetricsRenderer>()>& fallback) {
    const char* term = std::getenv("TERM");
    const bool capable = term && *term && std::strcmp(term, "dumb") != 0;
    if (isatty(STDOUT_FILENO) && capable) return std::make_unique<TuiRenderer>(interrupter);
    EMBER_CHECK(static_cast<bool>(fallback), Argument,
                "make_default_renderer: standard output is not a terminal and no fallback "
                "renderer was given");
    return fallback();
}

}  // namespace ember::train
