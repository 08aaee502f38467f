// A Learner run in a process of its own, for tests/test_learner.cpp to kill with SIGKILL:
//
//   learner_driver DIR EPOCHS [--resume] [--stall-at N]
//
// trains a 2→1 linear regression with dropout for EPOCHS epochs in DIR (checkpoints as
// NamedMpkGz, kept 2), seed 7. --stall-at N: while saving checkpoint N, after its model file is
// written and before its optimizer file, it creates DIR/stalled and sleeps (a run caught between
// a checkpoint's files, waiting for its kill). At the end it writes DIR/final (the model's
// record) and exits with the Interrupter's exit status (0 unless a signal stopped it).
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>

#include <ember/ember.hpp>
#include <ember/nn/dropout.hpp>
#include <ember/nn/linear.hpp>
#include <ember/nn/loss.hpp>
#include <ember/optim.hpp>
#include <ember/train/learner.hpp>
#include <ember/train/plain_renderer.hpp>

namespace {

namespace fs = std::filesystem;
namespace train = ember::train;
using AD = ember::Autodiff<ember::Cpu>;

template <ember::Backend B>
struct Batch {
    ember::Tensor<B, 2> x, y;
};

// 16 points of a grid, target 2·x0 − 3·x1 + 1, batches of 4 in an order set by the epoch.
template <ember::Backend B>
struct Loader {
    std::size_t n = 16, epoch = 0;
    std::size_t num_items() const { return n; }
    std::size_t num_batches() const { return n / 4; }
    void set_epoch(std::size_t e) { epoch = e; }
    std::vector<Batch<B>> iter() const {
        std::vector<Batch<B>> out;
        for (std::size_t s = 0; s < n; s += 4) {
            std::vector<float> x, y;
            for (std::size_t k = s; k < s + 4; ++k) {
                const std::size_t i = (k * 5 + epoch * 3) % n;
                const float x0 = float(i % 4) / 2 - 0.75f, x1 = float(i / 4) / 2 - 0.75f;
                x.push_back(x0), x.push_back(x1), y.push_back(2 * x0 - 3 * x1 + 1);
            }
            out.push_back({ember::Tensor<B, 2>::from_data(ember::TensorData(x, {4, 2}), {}),
                           ember::Tensor<B, 2>::from_data(ember::TensorData(y, {4, 1}), {})});
        }
        return out;
    }
};

template <ember::Backend B>
struct Regressor {
    ember::nn::Dropout dropout;
    ember::nn::Linear<B> linear;
    EMBER_MODULE(Regressor, dropout, linear)

    train::RegressionOutput<B> forward(const Batch<B>& b) const {
        auto out = linear.forward(dropout.forward(b.x));
        return {ember::nn::loss::MseLoss{}.forward(out, b.y), out, b.y};
    }
    train::TrainOutput<train::RegressionOutput<B>> step(
        const Batch<B>& b) const requires ember::AutodiffBackend<B> {
        auto item = forward(b);
        return {*this, item.loss.backward(), std::move(item)};
    }
    train::RegressionOutput<B> step(const Batch<B>& b) const requires(!ember::AutodiffBackend<B>) {
        return forward(b);
    }
};

using Rec = ember::record::NamedMpkGzFileRecorder<>;

// Stalls between the model and the optimizer file of checkpoint `stall_at`.
struct StallingRec : Rec {
    std::size_t stall_at = 0;
    fs::path dir;
    void record(const ember::record::Value& v, const fs::path& p) const {
        if (stall_at && p.filename().string() == "optim-" + std::to_string(stall_at)) {
            std::ofstream(dir / "stalled") << getpid() << '\n';
            for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
        }
        Rec::record(v, p);
    }
};

}  // namespace

int main(int argc, char** argv) {
    if (argc < 3) {
        std::fprintf(stderr, "usage: learner_driver DIR EPOCHS [--resume] [--stall-at N]\n");
        return 2;
    }
    const fs::path dir = argv[1];
    const std::size_t epochs = std::strtoul(argv[2], nullptr, 10);
    bool resume = false;
    StallingRec rec;
    rec.dir = dir;
    for (int i = 3; i < argc; ++i) {
        if (std::strcmp(argv[i], "--resume") == 0) resume = true;
        if (std::strcmp(argv[i], "--stall-at") == 0 && i + 1 < argc)
            rec.stall_at = std::strtoul(argv[++i], nullptr, 10);
    }
    try {
        train::LearnerBuilder<train::RegressionOutput<AD>, train::RegressionOutput<ember::Cpu>> b(
            dir);
        b.metric_train_numeric(train::LossMetric<AD>{})
            .metric_valid_numeric(train::LossMetric<ember::Cpu>{})
            .with_file_checkpointer(rec, 2)
            .num_epochs(epochs)
            .seed(7)
            .renderer(std::make_shared<train::PlainRenderer>());
        if (resume) b.resume();
        auto sched = ember::lr_scheduler::StepLrSchedulerConfig{0.05, 5, 0.5}.init();
        Regressor<AD> model{ember::nn::DropoutConfig{0.2}.init(),
                            ember::nn::LinearConfig{2, 1}.init<AD>({})};
        auto learner = b.build(model, ember::optim::AdamConfig{}.init<Regressor<AD>>(), sched);
        Loader<AD> tl;
        Loader<ember::Cpu> vl;
        const auto trained = learner.fit(tl, vl);
        trained.save_file(dir / "final", Rec{});
        return learner.interrupter().exit_status();
    } catch (const ember::Error& e) {
        std::fprintf(stderr, "learner_driver: %s\n", e.what());
        return 1;
    }
}
