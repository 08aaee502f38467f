// ember's side of the training acceptance (benchmarks/train.sh): epochs of the guide CNN or the
// MLP of ANCHORS.md on Fashion-MNIST with a plain loop — the loop of benchmarks/train_torch.py,
// line for line: same batch size, Adam with torch's defaults, a fresh shuffle each epoch — then
// the test accuracy. The model and batcher are the mnist example's. Prints one JSON line.
//
//   bench_train --model cnn|mlp [--threads N] [--epochs N] [--seed S] [--workers N]
//               [--batch-size N] [--data DIR] [--limit N]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include <ember/data.hpp>
#include <ember/ember.hpp>
#include <ember/nn.hpp>
#include <ember/optim.hpp>

#include "../examples/mnist/data.hpp"
#include "../examples/mnist/model.hpp"

namespace {

struct Options {
    std::string model = "cnn";
    std::size_t threads = 1;
    std::size_t epochs = 1;
    std::size_t seed = 42;
    std::size_t workers = 0;
    std::size_t batch_size = 64;
    std::size_t limit = 0;  // train on the first `limit` shuffled items only (0: all)
    std::string data;
};

Options parse(int argc, char** argv) {
    Options o;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (i + 1 >= argc) throw ember::ArgumentError("bench_train: " + a + " needs a value");
        const std::string v = argv[++i];
        if (a == "--model") o.model = v;
        else if (a == "--threads") o.threads = std::stoul(v);
        else if (a == "--epochs") o.epochs = std::stoul(v);
        else if (a == "--seed") o.seed = std::stoul(v);
        else if (a == "--workers") o.workers = std::stoul(v);
        else if (a == "--batch-size") o.batch_size = std::stoul(v);
        else if (a == "--limit") o.limit = std::stoul(v);
        else if (a == "--data") o.data = v;
        else throw ember::ArgumentError("bench_train: unknown option " + a);
    }
    if (o.model != "cnn" && o.model != "mlp")
        throw ember::ArgumentError("bench_train: --model must be cnn or mlp, got " + o.model);
    return o;
}

template <typename Model>
int run(const Options& o) {
    using B = ember::Autodiff<ember::Cpu>;
    using Inner = ember::Cpu;
    B::seed(o.seed);
    auto train_set = o.data.empty() ? ember::data::MnistDataset::train()
                                    : ember::data::MnistDataset::train(o.data);
    auto test_set = o.data.empty() ? ember::data::MnistDataset::test()
                                   : ember::data::MnistDataset::test(o.data);
    auto loader = ember::data::DataLoaderBuilder(mnist::MnistBatcher<B>{})
                      .batch_size(o.batch_size)
                      .shuffle(o.seed)
                      .num_workers(o.workers)
                      .build(std::move(train_set));
    auto test_loader = ember::data::DataLoaderBuilder(mnist::MnistBatcher<Inner>{})
                           .batch_size(500)
                           .num_workers(o.workers)
                           .build(std::move(test_set));

    Model model = Model::init();
    const double lr = o.model == "cnn" ? 1e-4 : 1e-3;
    auto optim = ember::optim::AdamConfig{.epsilon = 1e-8}.init<Model>();

    std::vector<double> epoch_s;
    for (std::size_t e = 0; e < o.epochs; ++e) {
        const auto start = std::chrono::steady_clock::now();
        std::size_t seen = 0;
        for (auto& batch : loader.iter()) {
            auto out = mnist::classify(model.forward(batch.images), batch);
            auto grads = ember::optim::GradientsParams::from_grads(out.loss.backward(), model);
            model = optim.step(lr, std::move(model), std::move(grads));
            seen += o.batch_size;
            if (o.limit && seen >= o.limit) break;
        }
        epoch_s.push_back(
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }

    const auto valid = model.valid();
    std::size_t correct = 0, total = 0;
    for (auto& batch : test_loader.iter()) {
        auto pred = valid.forward(batch.images).argmax(1).template flatten<1>(0, 1);
        correct += std::size_t(pred.equal(batch.targets).int_().sum().into_scalar());
        total += batch.targets.dims()[0];
    }

    std::printf("{\"framework\": \"ember\", \"model\": \"%s\", \"threads\": %zu, \"workers\": %zu, "
                "\"epoch_s\": [",
                o.model.c_str(), o.threads, o.workers);
    for (std::size_t i = 0; i < epoch_s.size(); ++i)
        std::printf("%s%.4f", i ? ", " : "", epoch_s[i]);
    std::printf("], \"test_accuracy\": %.2f}\n", 100.0 * double(correct) / double(total));
    return 0;
}

}  // namespace

int main(int argc, char** argv) try {
    const Options o = parse(argc, argv);
    ember::cpu::set_num_threads(o.threads);
    return o.model == "cnn" ? run<mnist::Cnn<ember::Autodiff<ember::Cpu>>>(o)
                            : run<mnist::Mlp<ember::Autodiff<ember::Cpu>>>(o);
} catch (const std::exception& e) {
    std::cerr << "bench_train: " << e.what() << '\n';
    return 1;
}
