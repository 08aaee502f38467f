// Feeds a TuiRenderer a synthetic two-epoch run, slowly, for tests/test_dashboard.cpp to watch
// in tmux. Training: 40 iterations of 25 items per epoch; validation: 10 of 20 items. Global
// iteration g (1..80) has loss 2/(1 + g/10) and accuracy 50 + 37.5 g/80 %; an epoch's
// validation loss is the training loss at its end plus 0.05, its accuracy the same minus 2.5.
// After the run it keeps showing the final state until the Interrupter is asked to stop
// (`q`, Ctrl-C, SIGINT), then waits 1.5 s as a Learner finishing its checkpoint would, gives
// the terminal back and exits with 42 after `q`, with 130 after Ctrl-C or SIGINT (as the
// examples do: Interrupter::exit_status); 3 if no stop came within 60 s.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "ember/train/dashboard.hpp"

using namespace ember::train;

namespace {

MetricEntry entry(const char* name, const char* fmt, double value, std::optional<double> mean) {
    char buf[64];
    std::snprintf(buf, sizeof buf, fmt, value);
    return {name, buf, value, mean};
}

void pause_ms(int ms) {
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}

}  // namespace

int main(int argc, char** argv) {
    const int step_ms = argc > 1 ? std::atoi(argv[1]) : 40;
    Interrupter interrupter;
    TuiRenderer renderer(interrupter);
    const std::size_t epochs = 2, train_iters = 40, valid_iters = 10;
    std::size_t global = 0;
    TrainingProgress last_valid;
    for (std::size_t epoch = 1; epoch <= epochs && !interrupter.should_stop(); ++epoch) {
        double loss_sum = 0;
        double loss = 0, acc = 0;
        for (std::size_t i = 1; i <= train_iters && !interrupter.should_stop(); ++i) {
            ++global;
            loss = 2.0 / (1.0 + double(global) / 10.0);
            acc = 50.0 + 37.5 * double(global) / 80.0;
            loss_sum += loss;
            renderer.update_train(entry("Loss", "%.4f", loss, loss_sum / double(i)));
            renderer.update_train(entry("Accuracy", "%.2f %%", acc, std::nullopt));
            renderer.render_train({epoch, epochs, i, i * 25, train_iters * 25, global});
            pause_ms(step_ms);
        }
        renderer.on_epoch_end(Split::Train, epoch);
        for (std::size_t i = 1; i <= valid_iters && !interrupter.should_stop(); ++i) {
            renderer.update_valid(entry("Loss", "%.4f", loss + 0.05, loss + 0.05));
            renderer.update_valid(entry("Accuracy", "%.2f %%", acc - 2.5, std::nullopt));
            last_valid = {epoch, epochs, i, i * 20, valid_iters * 20, global};
            renderer.render_valid(last_valid);
            pause_ms(step_ms);
        }
        renderer.on_epoch_end(Split::Valid, epoch);
    }
    for (int waited = 0; !interrupter.should_stop(); waited += 50) {
        if (waited > 60000) {
            renderer.on_run_end();
            std::puts("driver: no stop request");
            return 3;
        }
        pause_ms(50);
    }
    pause_ms(1500);
    renderer.on_run_end();
    std::puts("driver: stopped through the interrupter");
    return interrupter.signal() ? interrupter.exit_status() : 42;
}
