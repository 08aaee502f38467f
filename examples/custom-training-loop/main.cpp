// A training loop written by hand, without the Learner: Fashion-MNIST through a DataLoader, a
// model in two parts trained by two optimizers (Adam on the feature extractor, SGD with
// momentum on the classifier head), and gradients accumulated over several mini-batches before
// each step, so that the optimizers see an effective batch of batch_size × accumulate items.
// It runs on ember::Dispatch, on the device --backend names.
//
//   custom-training-loop [--epochs N] [--limit N] [--accumulate N] [--backend B] ...
//                                                                            (see --help)
// The modules, losses and optimizers with their Dispatch instances compiled in ember_dispatch.
#include <ember/dispatch/nn.hpp>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <optional>
#include <string>

#include "../backend.hpp"
#include "../cli.hpp"
#include "data.hpp"
#include "model.hpp"

namespace custom_loop {

using ember::optim::GradientsParams;

struct Options {
    std::size_t epochs = 3;
    std::size_t limit = 0;  // 0: the whole training split
    std::size_t accumulate = 4;
    std::size_t batch_size = 32;
    double lr_features = 1e-3;
    double lr_classifier = 1e-2;
    std::uint64_t seed = 42;
    std::optional<std::size_t> threads;
    std::string backend = "cpu";
};

Options parse(int argc, char** argv) {
    Options o;
    CLI::App app{"Trains a small CNN on Fashion-MNIST with a hand-written loop: Adam on the "
                 "feature extractor, SGD with momentum on the classifier head, gradients "
                 "accumulated over several mini-batches.",
                 "custom-training-loop"};
    ember_examples::setup(app);
    app.add_option("--epochs", o.epochs, "epochs to train")->check(ember_examples::positive);
    app.add_option("--limit", o.limit, "train on the first N training images only (0: all 60000)")
        ->check(ember_examples::non_negative);
    app.add_option("--accumulate", o.accumulate,
                   "mini-batches whose gradients are summed before each step")
        ->check(ember_examples::positive);
    app.add_option("--batch-size", o.batch_size, "images per mini-batch")
        ->check(ember_examples::positive);
    app.add_option("--lr-features", o.lr_features, "Adam's learning rate for the feature extractor")
        ->check(ember_examples::positive);
    app.add_option("--lr-classifier", o.lr_classifier,
                   "SGD's learning rate for the classifier head")
        ->check(ember_examples::positive);
    app.add_option("--seed", o.seed, "seed of the initial weights, dropout and shuffling");
    app.add_option("--threads", o.threads, "CPU backend threads (default: EMBER_NUM_THREADS or all)")
        ->check(ember_examples::positive);
    const auto* backend = ember_examples::add_backend_option(&app, o.backend);
    ember_examples::parse_or_exit(app, argc, argv);
    ember_examples::backend_from_env(app, {backend}, o.backend);
    return o;
}

/// Running sums of one pass over a split.
struct Tally {
    double loss_sum = 0;  // batch loss × batch items
    std::size_t correct = 0;
    std::size_t items = 0;

    template <ember::Backend B>
    void add(const ember::Tensor<B, 1>& loss, const ember::Tensor<B, 2>& scores,
             const ember::Tensor<B, 1, ember::Int>& targets) {
        const std::size_t n = targets.dims()[0];
        loss_sum += double(loss.into_scalar()) * double(n);
        auto predicted = scores.argmax(1).template flatten<1>(0, 1);
        correct += std::size_t(predicted.equal(targets).int_().sum().into_scalar());
        items += n;
    }
    double loss() const { return loss_sum / double(items); }
    double accuracy() const { return 100.0 * double(correct) / double(items); }
};

void run(const Options& o) {
    using B = ember::Dispatch;
    using Inner = B::InnerBackend;
    if (o.threads) ember::cpu::set_num_threads(*o.threads);
    B::seed(o.seed);
    // Training records the graph (autodiff); testing runs on the same device without.
    const auto test_device = ember_examples::backend_device_of(o.backend);
    const auto device = test_device.autodiff(true);

    auto train_split = ember::data::MnistDataset::train();
    const std::size_t n_train =
        o.limit == 0 ? train_split.len() : std::min(o.limit, train_split.len());
    auto train_loader = ember::data::DataLoaderBuilder(FashionBatcher<B>{})
                            .batch_size(o.batch_size)
                            .set_device(device)
                            .shuffle(o.seed)
                            .num_workers(1)
                            .build(ember::data::PartialDataset(train_split, 0, n_train));
    auto test_loader = ember::data::DataLoaderBuilder(FashionBatcher<Inner>{})
                           .batch_size(500)
                           .set_device(test_device)
                           .num_workers(1)
                           .build(ember::data::MnistDataset::test());

    auto model = NetConfig{}.init<B>(device);
    // One optimizer per part, each typed by the module it updates.
    auto adam = ember::optim::AdamConfig{}.init<FeatureExtractor<B>>();
    auto sgd = ember::optim::SgdConfig{}
                   .with_momentum(ember::optim::MomentumConfig{0.9, 0.0})
                   .init<Classifier<B>>();
    // One accumulator per part too: each optimizer must get exactly its own part's gradients.
    ember::optim::GradientsAccumulator features_grads, classifier_grads;
    const auto loss_fn = ember::nn::loss::CrossEntropyLossConfig{}.init<B>();
    const auto valid_loss_fn = ember::nn::loss::CrossEntropyLossConfig{}.init<Inner>();

    const std::size_t n_batches = train_loader.num_batches();
    std::printf(
        "training on %zu images (%zu mini-batches of %zu), stepping every %zu "
        "mini-batches; testing on %zu images\n",
        n_train, n_batches, o.batch_size, o.accumulate, test_loader.num_items());
    std::printf(
        "feature extractor: %zu parameters (Adam, lr %g); classifier: %zu parameters "
        "(SGD momentum 0.9, lr %g)\n",
        model.features.num_params(), o.lr_features, model.classifier.num_params(), o.lr_classifier);

    for (std::size_t epoch = 1; epoch <= o.epochs; ++epoch) {
        const auto start = std::chrono::steady_clock::now();
        Tally train;
        std::size_t batch_index = 0, steps = 0;
        for (const auto& batch : train_loader.iter()) {
            // The group of mini-batches this one belongs to; the last group of an epoch may be
            // short. Dividing each loss by the group's size makes the summed gradients the mean
            // gradient of the whole group, as one big batch would give: scaling the loss, not
            // the learning rate, keeps this right for Adam, which ignores a gradient's scale.
            const std::size_t group_start = batch_index - batch_index % o.accumulate;
            const std::size_t group_size = std::min(o.accumulate, n_batches - group_start);

            auto scores = model.forward(batch.images);
            auto loss = loss_fn.forward(scores, batch.targets);
            train.add(loss, scores, batch.targets);

            auto grads = (loss / double(group_size)).backward();
            // from_module takes one part's gradients out of `grads` and leaves the rest.
            features_grads.accumulate(model.features,
                                      GradientsParams::from_module(grads, model.features));
            classifier_grads.accumulate(model.classifier,
                                        GradientsParams::from_module(grads, model.classifier));

            if (++batch_index == group_start + group_size) {
                model.features =
                    adam.step(o.lr_features, std::move(model.features), features_grads.grads());
                model.classifier = sgd.step(o.lr_classifier, std::move(model.classifier),
                                            classifier_grads.grads());
                ++steps;
            }
        }

        // valid(): the same weights off autodiff (on Dispatch: on the device without it), no
        // graph, dropout off.
        const auto eval = model.valid();
        Tally test;
        for (const auto& batch : test_loader.iter()) {
            auto scores = eval.forward(batch.images);
            test.add(valid_loss_fn.forward(scores, batch.targets), scores, batch.targets);
        }
        const double seconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        std::printf(
            "epoch %zu/%zu | train loss %.4f, accuracy %.2f %% | test loss %.4f, "
            "accuracy %.2f %% | %zu steps | %.1f s\n",
            epoch, o.epochs, train.loss(), train.accuracy(), test.loss(), test.accuracy(), steps,
            seconds);
    }
}

}  // namespace custom_loop

int main(int argc, char** argv) {
    try {
        custom_loop::run(custom_loop::parse(argc, argv));
        return 0;
    } catch (const ember::Error& e) {
        std::cerr << "custom-training-loop: " << e.what() << '\n';
        return 1;
    }
}
