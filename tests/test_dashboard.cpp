// The live dashboard: its pure parts with hand-worked values, and the whole TuiRenderer driven
// in tmux through tests/dashboard_driver.cpp (whose synthetic run is described there).
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "ember/tensor/error.hpp"
#include "ember/train/dashboard.hpp"
#include "ember/train/detail/dashboard.hpp"

namespace test_dashboard {

using namespace ember::train;
using namespace ember::train::detail;

namespace {

bool contains(const std::string& s, const std::string& needle) {
    return s.find(needle) != std::string::npos;
}

std::string joined(const std::vector<std::string>& lines) {
    std::string s;
    for (const auto& l : lines) s += l + "\n";
    return s;
}

}  // namespace

TEST_CASE("decode_keys reads arrows, q and Ctrl-C and keeps cut sequences", "[dashboard]") {
    std::string in = "\x1b[C\x1b[D\x1b[A\x1b[Bq\x03";
    CHECK(decode_keys(in) ==
          std::vector<Key>{Key::Right, Key::Left, Key::Up, Key::Down, Key::Quit, Key::CtrlC});
    CHECK(in.empty());

    in = "\x1bOD\x1b[1;5C";  // application-mode left, Ctrl+right
    CHECK(decode_keys(in) == std::vector<Key>{Key::Left, Key::Right});

    in = "x\x1b[";  // an arrow cut after its CSI: waits for the rest
    CHECK(decode_keys(in) == std::vector<Key>{Key::Other});
    CHECK(in == "\x1b[");
    in += "C";
    CHECK(decode_keys(in) == std::vector<Key>{Key::Right});
    CHECK(in.empty());

    in = "\x1b";
    CHECK(decode_keys(in).empty());
    CHECK(in == "\x1b");
    CHECK(decode_keys(in, true) == std::vector<Key>{Key::Other});  // the Escape key itself
    CHECK(in.empty());

    in = "\x1b[5~";  // page up: a whole sequence, ignored
    CHECK(decode_keys(in) == std::vector<Key>{Key::Other});
    CHECK(in.empty());
}

TEST_CASE("BrailleCanvas maps dots to Unicode braille", "[dashboard]") {
    BrailleCanvas one(1, 1);
    for (int x = 0; x < 2; ++x)
        for (int y = 0; y < 4; ++y) one.set(x, y, 0);
    CHECK(one.row(0) == "\u28ff");  // all eight dots

    BrailleCanvas corners(1, 1);
    corners.set(0, 0, 0);  // dot 1 = 0x01
    corners.set(1, 3, 1);  // dot 8 = 0x80
    CHECK(corners.bits(0, 0) == 0x81);
    CHECK(corners.owner(0, 0) == 1);
    CHECK(corners.row(0) == "\u2881");

    BrailleCanvas flat(2, 1);
    flat.line(0, 3, 3, 3, 0);  // the bottom row of dots: dots 7 and 8 of both cells
    CHECK(flat.row(0) == "\u28c0\u28c0");

    // (0,0) (1,1) | (2,2) (3,3): dots 1+5 = 0x11, then dots 3+8 = 0x84
    BrailleCanvas diagonal(2, 1);
    diagonal.line(0, 0, 3, 3, 0);
    CHECK(diagonal.row(0) == "\u2811\u2884");

    BrailleCanvas off(1, 1);
    off.set(-1, 0, 0);
    off.set(2, 0, 0);
    off.set(0, 4, 0);
    CHECK(off.row(0) == " ");
}

TEST_CASE("plot_series scales points onto the canvas and colours by series", "[dashboard]") {
    // (0,0) -> dot (0,3), (1,1) -> dot (3,0); Bresenham passes (1,2) and (2,1):
    // cell 0 has dots 7 (0,3) and 6 (1,2) = 0x60, cell 1 dots 2 (0,1) and 4 (1,0) = 0x0a.
    BrailleCanvas c(2, 1);
    plot_series(c, {{0, 0}, {1, 1}}, {0, 1, 0, 1}, 0);
    CHECK(c.row(0) == "\u2860\u280a");
    CHECK(c.row(0, {"36", "33"}) == "\x1b[36m\u2860\u280a\x1b[0m");

    BrailleCanvas gap(2, 1);  // a NaN breaks the line: two lone dots
    plot_series(gap, {{0, 1}, {0.5, NAN}, {1, 1}}, {0, 1, 0, 1}, 0);
    CHECK(gap.row(0) == "\u2801\u2808");
}

TEST_CASE("value_range covers the series and widens flat ones", "[dashboard]") {
    const std::vector<ChartPoint> a{{0, 1}, {1, 3}}, b{{0, 2}}, flat{{0, 2}, {1, 2}};
    const std::vector<ChartPoint> zero{{0, 0}}, none;
    CHECK(value_range({&a, &b}) == std::pair<double, double>{1, 3});
    const auto [lo, hi] = value_range({&flat});
    CHECK(lo == Approx(1.8));
    CHECK(hi == Approx(2.2));
    CHECK(value_range({&zero}) == std::pair<double, double>{-1, 1});
    CHECK(value_range({&none}) == std::pair<double, double>{0, 1});
}

TEST_CASE("progress_bar fills whole and eighth cells", "[dashboard]") {
    CHECK(progress_bar(0.5, 10) == "\u2588\u2588\u2588\u2588\u2588     ");
    CHECK(progress_bar(0.55, 10) == "\u2588\u2588\u2588\u2588\u2588\u258c    ");  // 5.5 cells
    CHECK(progress_bar(0.0625, 2) == "\u258f ");  // an eighth of a cell
    CHECK(progress_bar(0.57, 100).substr(0, 56 * 3) == [] {
        std::string s;
        for (int i = 0; i < 56; ++i) s += "\u2588";
        return s;
    }());
    CHECK(display_width(progress_bar(0.57, 100)) == 100);
    CHECK(progress_bar(0, 4) == "    ");
    CHECK(progress_bar(NAN, 2) == "  ");
    CHECK(progress_bar(1.2, 3) == "\u2588\u2588\u2588");
    CHECK(progress_bar(0.5, 0).empty());
}

TEST_CASE("durations and ETAs", "[dashboard]") {
    CHECK(format_duration(45.9) == "45s");
    CHECK(format_duration(185) == "3m 05s");
    CHECK(format_duration(7620) == "2h 07m");
    CHECK(format_duration(-3) == "0s");
    CHECK(eta_seconds(10, 0.25) == Approx(30));  // a quarter took 10 s: 3 quarters left
    CHECK(eta_seconds(10, 1) == Approx(0));
    CHECK_FALSE(eta_seconds(10, 0).has_value());
}

TEST_CASE("display_width and fit_width skip escape sequences", "[dashboard]") {
    CHECK(display_width("\x1b[36mab\u2588\x1b[0m") == 3);
    CHECK(fit_width("abcdef", 3) == "abc");
    CHECK(fit_width("ab", 4) == "ab  ");
    CHECK(fit_width("\x1b[1mabcd\x1b[0m", 2) == "\x1b[1mab\x1b[0m");
}

TEST_CASE("run_position places iterations along the run in epochs", "[dashboard]") {
    CHECK(run_position({2, 3, 1, 25, 100, 0}, 0) == Approx(1.25));
    CHECK(run_position({1, 3, 5, 0, 0, 0}, 10) == Approx(0.5));  // from last epoch's count
    CHECK(run_position({1, 3, 3, 0, 0, 0}, 0) == Approx(0.75));  // 3 / (3 + 1)
}

TEST_CASE("DashboardState keeps histories and epoch means", "[dashboard]") {
    DashboardState s;
    s.update(Split::Train, {"Loss", "3.0", 3.0, 2.5}, 0.1);
    s.update(Split::Train, {"Acc", "1", 1.0, std::nullopt}, 0.1);
    s.update(Split::Train, {"Acc", "2", 2.0, std::nullopt}, 0.5);
    s.update(Split::Train, {"Acc", "6", 6.0, std::nullopt}, 0.9);
    s.update(Split::Train, {"Note", "text", std::nullopt, std::nullopt}, 0.9);
    s.end_epoch(Split::Train, 1);
    CHECK(s.metric_order == std::vector<std::string>{"Loss", "Acc", "Note"});
    CHECK(s.numeric_metrics() == std::vector<std::string>{"Loss", "Acc"});
    REQUIRE(s.train["Loss"].epoch_means.size() == 1);
    CHECK(s.train["Loss"].epoch_means[0].y == 2.5);  // the Learner's mean wins
    REQUIRE(s.train["Acc"].epoch_means.size() == 1);
    CHECK(s.train["Acc"].epoch_means[0].x == 0.5);
    CHECK(s.train["Acc"].epoch_means[0].y == Approx(3.0));  // (1 + 2 + 6) / 3
    CHECK(s.train["Acc"].history.size() == 3);
    CHECK(s.train["Note"].epoch_means.empty());
}

TEST_CASE("compose_frame lays out chart, values and progress", "[dashboard]") {
    DashboardState s;
    s.color = false;
    s.update(Split::Train, {"Loss", "0.5000", 0.5, 0.75}, 1.0);
    s.update(Split::Train, {"Accuracy", "80.00 %", 80.0, std::nullopt}, 1.0);
    s.update(Split::Valid, {"Loss", "0.6000", 0.6, 0.6}, 1.0);
    s.train_progress = TrainingProgress{2, 2, 2, 50, 100, 42};
    s.elapsed = 30;        // 75 % of the run: 10 s left
    s.epoch_elapsed = 10;  // half the epoch: 10 s left
    const auto frame = compose_frame(s, 100, 30);
    REQUIRE(frame.size() == 30);
    for (const auto& line : frame) CHECK(display_width(line) == 100);
    const std::string text = joined(frame);
    CHECK(contains(frame[0], "Epoch 2/2"));
    CHECK(contains(frame[1], "Chart: Loss \u2014 iterations"));
    CHECK(contains(text, "\u25b8 Loss"));  // the charted metric is marked
    CHECK(contains(text, "0.5000 (mean 0.75)"));
    CHECK(contains(text, "0.6000 (mean 0.6)"));
    CHECK(contains(text, "80.00 %"));
    CHECK(contains(text, " 50%  50/100 items  ETA 10s"));
    CHECK(contains(text, " 75%  elapsed 30s  ETA 10s"));
    CHECK(contains(text, "q: stop"));
    CHECK(contains(text, "2 epochs"));

    s.selected = 1;
    s.view = ChartView::Epochs;
    s.stopping = true;
    const std::string next = joined(compose_frame(s, 100, 30));
    CHECK(contains(next, "Chart: Accuracy \u2014 epoch means"));
    CHECK(contains(next, "stopping after this iteration \u2014 a resumed run redoes this epoch"));

    CHECK(contains(compose_frame(s, 30, 10)[0], "terminal too small (30x10)"));
}

TEST_CASE("make_default_renderer falls back off a terminal", "[dashboard]") {
    if (isatty(STDOUT_FILENO)) {
        WARN("stdout is a terminal here: the fallback path is checked in tmux runs only");
        return;
    }
    struct Recorder : MetricsRenderer {
        void update_train(const MetricEntry&) override {}
        void update_valid(const MetricEntry&) override {}
        void render_train(const TrainingProgress&) override {}
        void render_valid(const TrainingProgress&) override {}
    };
    Interrupter in;
    auto r = make_default_renderer(in, [] { return std::make_unique<Recorder>(); });
    CHECK(dynamic_cast<Recorder*>(r.get()) != nullptr);
    CHECK_THROWS_AS(make_default_renderer(in, nullptr), ember::ArgumentError);
    CHECK_THROWS_AS(TuiRenderer(in), ember::DeviceError);
}

// ---- the dashboard in tmux ----------------------------------------------------------------

namespace {

std::string run(const std::string& cmd) {
    std::string out;
    if (FILE* p = popen(cmd.c_str(), "r")) {
        char buf[4096];
        std::size_t n;
        while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
        pclose(p);
    }
    return out;
}

std::string driver_path() {
    if (const char* env = std::getenv("EMBER_DASHBOARD_DRIVER")) return env;
#ifdef EMBER_DASHBOARD_DRIVER
    return EMBER_DASHBOARD_DRIVER;
#else
    return {};
#endif
}

struct Tmux {
    // A server per test: a killed server's socket may linger for a moment.
    static inline int count = 0;
    std::string socket = "ember-dash-" + std::to_string(getpid()) + "-" + std::to_string(++count);
    std::string tmux(const std::string& args) const {
        return run("tmux -L " + socket + " " + args + " 2>/dev/null");
    }
    std::string screen() const { return tmux("capture-pane -p -t t"); }
    // Polls the pane until it shows `needle`; the last capture is kept for the messages.
    bool wait_for(const std::string& needle, std::string& last, int timeout_ms = 15000) const {
        for (int t = 0; t < timeout_ms; t += 100) {
            last = screen();
            if (contains(last, needle)) return true;
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
        }
        return false;
    }
    ~Tmux() { tmux("kill-server"); }
};

// Starts the driver in a 120x40 pane; afterwards the pane shows its exit status and whether
// the terminal is back in canonical mode, and stays open for the capture.
bool start(const Tmux& t, const std::string& driver) {
    const std::string cmd = "'" + driver +
                            "; echo EXIT=$?; stty -a | tr \" \" \"\\n\" | grep -x -- \"-*icanon\"; "
                            "echo DONE; sleep 120'";
    t.tmux("new-session -d -s t -x 120 -y 40 " + cmd);
    return contains(t.tmux("list-sessions"), "t:");
}

}  // namespace

TEST_CASE("the dashboard in tmux: chart, values, progress, keys and a clean exit", "[dashboard]") {
    if (run("command -v tmux").empty()) {
        WARN("tmux is not installed: skipping the live dashboard test");
        return;
    }
    const std::string driver = driver_path();
    struct stat st {};
    if (driver.empty() || stat(driver.c_str(), &st) != 0) {
        WARN(
            "no dashboard driver (set EMBER_DASHBOARD_DRIVER to tests/dashboard_driver.cpp "
            "built): skipping the live dashboard test");
        return;
    }
    Tmux t;
    REQUIRE(start(t, driver));
    std::string s;
    REQUIRE(t.wait_for("Chart: Loss", s));
    CHECK(contains(s, "ember \u00b7 training"));
    CHECK(t.tmux("display -p -t t '#{alternate_on}'") == "1\n");

    t.tmux("send-keys -t t Right");
    CHECK(t.wait_for("Chart: Accuracy \u2014 iterations", s));
    t.tmux("send-keys -t t Up");
    CHECK(t.wait_for("Chart: Accuracy \u2014 epoch means", s));
    t.tmux("send-keys -t t Left");
    CHECK(t.wait_for("Chart: Loss \u2014 epoch means", s));
    t.tmux("send-keys -t t Down");
    CHECK(t.wait_for("Chart: Loss \u2014 iterations", s));

    // The final state: epoch 2's validation done, global iteration 80.
    REQUIRE(t.wait_for("200/200 items", s));
    INFO(s);
    CHECK(contains(s, "Epoch 2/2"));
    CHECK(contains(s, "Epoch 2/2 valid"));
    CHECK(contains(s, "100%  200/200 items  ETA 0s"));
    CHECK(contains(s, "100%  elapsed"));
    CHECK(contains(s, "\u2588\u2588\u2588\u2588\u2588\u2588\u2588\u2588"));  // a full bar
    CHECK(contains(s, "0.2222"));   // train loss 2 / (1 + 80/10)
    CHECK(contains(s, "0.2722"));   // valid loss 0.2222 + 0.05
    CHECK(contains(s, "87.50 %"));  // train accuracy 50 + 37.5
    CHECK(contains(s, "85.00 %"));  // valid accuracy
    CHECK((contains(s, "\xe2\xa0") || contains(s, "\xe2\xa1") || contains(s, "\xe2\xa2") ||
           contains(s, "\xe2\xa3")));  // the chart drew braille (U+2800..U+28FF)

    t.tmux("send-keys -t t q");
    CHECK(t.wait_for("stopping after this iteration \u2014 a resumed run redoes this epoch", s));
    REQUIRE(t.wait_for("DONE", s));
    CHECK(contains(s, "EXIT=42"));  // the driver saw interrupter.should_stop()
    CHECK(contains(s, "[train] Loss: 0.2222"));
    CHECK(contains(s, "\nicanon"));  // canonical mode is back (stty shows "-icanon" if not)
    CHECK_FALSE(contains(s, "ember \u00b7 training"));
    CHECK(t.tmux("display -p -t t '#{alternate_on}'") == "0\n");
}

TEST_CASE("the dashboard in tmux: Ctrl-C stops through the interrupter, exit status 130",
          "[dashboard]") {
    const std::string driver = driver_path();
    struct stat st {};
    if (run("command -v tmux").empty() || driver.empty() || stat(driver.c_str(), &st) != 0) {
        WARN("tmux or the dashboard driver is missing: skipping");
        return;
    }
    Tmux t;
    REQUIRE(start(t, driver));
    std::string s;
    REQUIRE(t.wait_for("Epoch 1/2", s));
    t.tmux("send-keys -t t C-c");
    CHECK(t.wait_for("stopping after this iteration", s));
    REQUIRE(t.wait_for("DONE", s));
    CHECK(contains(s, "EXIT=130"));  // 128 + SIGINT, as shells expect
    CHECK(contains(s, "training stopped on request"));
    CHECK(t.tmux("display -p -t t '#{alternate_on}'") == "0\n");
}

TEST_CASE("the dashboard in tmux: SIGINT stops, a resize redraws", "[dashboard]") {
    const std::string driver = driver_path();
    struct stat st {};
    if (run("command -v tmux").empty() || driver.empty() || stat(driver.c_str(), &st) != 0) {
        WARN("tmux or the dashboard driver is missing: skipping");
        return;
    }
    Tmux t;
    REQUIRE(start(t, driver));
    std::string s;
    REQUIRE(t.wait_for("Epoch 1/2", s));
    // SIGWINCH: the header's epoch counter is right-aligned, so it moves with the width.
    t.tmux("resize-window -t t -x 80 -y 24");
    bool moved = false;
    for (int i = 0; i < 50 && !moved; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        const std::string first = t.screen().substr(0, t.screen().find('\n'));
        moved = contains(first, "Epoch") && display_width(first) <= 80 &&
                first.find("Epoch") + 1 >= first.size() - 12;
    }
    CHECK(moved);
    // The driver is the pane shell's child.
    const std::string shell = t.tmux("display -p -t t '#{pane_pid}'");
    const std::string pid = run("pgrep -P " + shell.substr(0, shell.find('\n')));
    REQUIRE(!pid.empty());
    run("kill -INT " + pid.substr(0, pid.find('\n')));
    CHECK(t.wait_for("stopping after this iteration", s));
    REQUIRE(t.wait_for("DONE", s));
    CHECK(contains(s, "EXIT=130"));  // 128 + SIGINT, as shells expect
    CHECK(contains(s, "\nicanon"));
}

}  // namespace test_dashboard
