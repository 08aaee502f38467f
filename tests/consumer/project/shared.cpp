// A program linked against ember's shared libraries (consumer_add_subdirectory_shared): it trains
// a small model through the Learner (ember::train, ember::data's types, Autodiff<Cpu> from
// ember::cpu), runs a Dispatch program with gradients (ember::dispatch), and catches an error
// thrown inside a library by its type. Everything it calls across the library boundary must be
// exported (EMBER_API); the libraries hide the rest. Exit status 0 when every check passes.
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <ember/dispatch/dispatch.hpp>
#include <ember/ember.hpp>
#include <ember/nn/linear.hpp>
#include <ember/nn/loss.hpp>
#include <ember/optim.hpp>
#include <ember/train/learner.hpp>
#include <ember/train/plain_renderer.hpp>

namespace {
namespace fs = std::filesystem;
namespace train = ember::train;
using AD = ember::Autodiff<ember::Cpu>;

int failures = 0;

void check(bool ok, const std::string& what) {
    if (!ok) {
        std::cerr << "consumer_shared: FAILED: " << what << '\n';
        ++failures;
    }
}

template <ember::Backend B>
struct Batch {
    ember::Tensor<B, 2> x, y;
};

// 16 points of a grid, target 2·x0 − 3·x1 + 1, in 4 batches of 4.
template <ember::Backend B>
struct Loader {
    std::size_t num_items() const { return 16; }
    std::size_t num_batches() const { return 4; }
    void set_epoch(std::size_t) {}
    std::vector<Batch<B>> iter() const {
        std::vector<Batch<B>> out;
        for (std::size_t s = 0; s < 16; s += 4) {
            std::vector<float> x, y;
            for (std::size_t i = s; i < s + 4; ++i) {
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
    ember::nn::Linear<B> linear;
    EMBER_MODULE(Regressor, linear)

    train::RegressionOutput<B> forward(const Batch<B>& b) const {
        auto out = linear.forward(b.x);
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

// The mean squared error of `model` over the whole grid.
template <ember::Backend B>
double grid_loss(const Regressor<B>& model) {
    double sum = 0;
    for (const auto& b : Loader<B>{}.iter()) sum += model.forward(b).loss.into_scalar();
    return sum / 4;
}
}  // namespace

int main() {
    const fs::path dir = fs::temp_directory_path() / "ember-consumer-shared";
    fs::remove_all(dir);

    // The Learner: 20 epochs of Adam (learning rate 0.1) on the regression; the loss must fall
    // well below its start (a least-squares fit of a linear target reaches 0).
    try {
        train::LearnerBuilder<train::RegressionOutput<AD>, train::RegressionOutput<ember::Cpu>> b(
            dir);
        b.metric_train_numeric(train::LossMetric<AD>{})
            .metric_valid_numeric(train::LossMetric<ember::Cpu>{})
            .num_epochs(20)
            .seed(7)
            .renderer(std::make_shared<train::PlainRenderer>());
        Regressor<AD> model{ember::nn::LinearConfig{2, 1}.init<AD>({})};
        const double before = grid_loss(model.valid());
        auto learner = b.build(model, ember::optim::AdamConfig{}.init<Regressor<AD>>(), 0.1);
        const auto trained = learner.fit(Loader<AD>{}, Loader<ember::Cpu>{});
        const double after = grid_loss(trained.valid());
        std::cout << "consumer_shared: grid loss " << before << " -> " << after << '\n';
        check(std::isfinite(after) && after < 0.25 * before, "the Learner reduces the loss");
        check(fs::exists(dir / "metrics.csv"), "the Learner writes metrics.csv");
    } catch (const ember::Error& e) {
        check(false, std::string("the Learner threw: ") + e.what());
    }

    // Dispatch: L = sum(w·w·c) on the CPU with autodiff, dL/dw = 2·w·c.
    try {
        using ember::Dispatch;
        const auto d = ember::DispatchDevice::parse("cpu+autodiff");
        auto w = ember::Tensor<Dispatch, 1>::from_floats({1.f, -2.f, 3.f}, d).require_grad();
        auto c = ember::Tensor<Dispatch, 1>::from_floats({1.f, 2.f, 0.5f}, d.autodiff(false));
        auto grads = (w * w * c).sum().backward();
        const auto g = w.grad(grads);
        check(g && g->to_data().to_vec<float>() == std::vector<float>{2.f, -8.f, 3.f},
              "Dispatch computes dL/dw = 2·w·c");
        check(Dispatch::name() == "dispatch", "Dispatch::name");
    } catch (const ember::Error& e) {
        check(false, std::string("Dispatch threw: ") + e.what());
    }

    // An error raised inside ember's libraries is caught by its type in the program.
    bool caught = false;
    try {
        auto a = ember::Tensor<ember::Cpu, 2>::zeros({2, 3}, {});
        (void)a.matmul(a);
    } catch (const ember::ShapeError& e) {
        caught = std::string(e.what()).find("matmul") != std::string::npos;
    } catch (...) {
    }
    check(caught, "a ShapeError thrown by the library is caught as ember::ShapeError");

    fs::remove_all(dir);
    if (failures != 0) {
        std::cerr << "consumer_shared: " << failures << " check(s) failed\n";
        return EXIT_FAILURE;
    }
    std::cout << "consumer_shared: all checks passed\n";
    return EXIT_SUCCESS;
}
