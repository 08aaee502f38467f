// bench_scale: ember's side of issue 37's CPU scaling benchmark (benchmarks/cpu_scale.sh, beside
// benchmarks/cpu_scale_torch.py). One process sweeps the thread counts, so every count is timed
// on the same weights, batch and process state.
//
//   bench_scale train --model mlp|cnn|resnet|gpt [--batch N] [--seq N] [--threads 1,2,4,8,16]
//                     [--init-from W.pt] [--batch-from B.pt] [--loss-steps N]
//                     [--min-time S] [--max-reps N] [--warmup N]
//   bench_scale infer --model mlp|cnn|resnet|gpt --batch N [--threads 1,16] [--min-time S] ...
//
// train: a training step (forward, loss, backward, optimizer step) of the mnist example's MLP and
// guide CNN (Adam, lr 1e-3 / 1e-4), the resnet example's CIFAR ResNet-18 (Adam 1e-3) and the gpt
// example's GPT-2-small-shaped model (AdamW as the example; dropout 0), on Autodiff<Cpu>. With
// --init-from the initial weights are PyTorch's (cpu_scale_torch.py prepare writes them); with
// --batch-from the batch too (else a seeded random one; the GPT's is the example's bench batch),
// and --loss-steps prints the losses of the first steps: the figures PyTorch prints from the
// same start. infer: the models' ONNX graphs as ember-onnx imports them (generated C++, compiled
// in when the build was configured with BENCH_SCALE_ONNX_DIR), forward passes on plain Cpu.
//
// Each (thread count) is timed after --warmup steps: steps run until --min-time seconds have
// passed (at least 2 steps, at most --max-reps), and the median step time is reported. One JSON
// line per thread count: {"framework": "ember", "kind": "train"|"infer", "model", "batch",
// "threads", "ms" (median), "ms_mean", "ms_best" (the fastest step), "cpu_ms" (the process's CPU
// time a step, all threads, median), "reps", "loss"}. Benchmarks measure, they never assert.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include <ember/ember.hpp>
#include <ember/nn.hpp>
#include <ember/optim.hpp>
#include <ember/record.hpp>
#include <ember/record/pytorch.hpp>

#include "../examples/gpt/data.hpp"
#include "../examples/gpt/model.hpp"
#include "../examples/gpt/pytorch.hpp"
#include "../examples/mnist/data.hpp"
#include "../examples/mnist/model.hpp"
#include "../examples/resnet/model.hpp"
#include "bench_scale.hpp"

namespace bench_scale {

namespace {

using B = ember::Autodiff<ember::Cpu>;

Options parse(int argc, char** argv) {
    Options o;
    if (argc < 2) throw ember::ArgumentError("bench_scale: say train or infer (see the header)");
    o.command = argv[1];
    if (o.command != "train" && o.command != "infer")
        throw ember::ArgumentError("bench_scale: the command is train or infer, got " + o.command);
    for (int i = 2; i < argc; ++i) {
        const std::string a = argv[i];
        if (i + 1 >= argc) throw ember::ArgumentError("bench_scale: " + a + " needs a value");
        const std::string v = argv[++i];
        if (a == "--model")
            o.model = v;
        else if (a == "--batch")
            o.batch = std::stoul(v);
        else if (a == "--seq")
            o.seq = std::stoul(v);
        else if (a == "--threads")
            o.threads = parse_list(v);
        else if (a == "--init-from")
            o.init_from = v;
        else if (a == "--batch-from")
            o.batch_from = v;
        else if (a == "--loss-steps")
            o.loss_steps = std::stoul(v);
        else if (a == "--min-time")
            o.min_time = std::stod(v);
        else if (a == "--max-reps")
            o.max_reps = std::stoul(v);
        else if (a == "--warmup")
            o.warmup = std::stoul(v);
        else if (a == "--seed")
            o.seed = std::stoul(v);
        else
            throw ember::ArgumentError("bench_scale: unknown option " + a);
    }
    if (o.model != "mlp" && o.model != "cnn" && o.model != "resnet" && o.model != "gpt")
        throw ember::ArgumentError("bench_scale: --model is mlp, cnn, resnet or gpt, got " +
                                   o.model);
    if (o.batch == 0 || o.threads.empty())
        throw ember::ArgumentError("bench_scale: --batch and --threads must be positive");
    return o;
}

// A seeded batch of standard-normal inputs of `dims` and uniform class ids in [0, classes).
template <std::size_t D>
std::pair<ember::Tensor<B, D>, ember::Tensor<B, 1, ember::Int>> random_batch(
    std::array<std::size_t, D> dims, std::size_t classes) {
    std::vector<std::size_t> shape(dims.begin(), dims.end());
    auto x = ember::Tensor<B, D>::random(ember::Shape(shape), ember::Distribution::Normal(0, 1));
    auto y = ember::Tensor<B, 1>::random(ember::Shape{dims[0]},
                                         ember::Distribution::Uniform(0, double(classes)))
                 .int_();
    return {std::move(x), std::move(y)};
}

// The "images" and "targets" of cpu_scale_torch.py's batch file, or a random batch like them.
template <std::size_t D>
std::pair<ember::Tensor<B, D>, ember::Tensor<B, 1, ember::Int>> batch_of(
    const Options& o, std::array<std::size_t, D> dims, std::size_t classes) {
    if (o.batch_from.empty()) return random_batch<D>(dims, classes);
    const auto tensors = ember::record::read_pytorch_tensors(o.batch_from);
    const ember::TensorData *images = nullptr, *targets = nullptr;
    for (const auto& [name, data] : tensors) {
        if (name == "images") images = &data;
        if (name == "targets") targets = &data;
    }
    EMBER_CHECK(images && targets, Format, "bench_scale: ", o.batch_from,
                " must hold 'images' and 'targets'");
    std::vector<std::size_t> want(dims.begin(), dims.end());
    EMBER_CHECK(images->shape() == ember::Shape(want), Shape, "bench_scale: ", o.batch_from,
                ": images ", images->shape().to_string(), ", expected ",
                ember::Shape(want).to_string());
    return {ember::Tensor<B, D>::from_data(images->convert(ember::DType::F32)),
            ember::Tensor<B, 1, ember::Int>::from_data(targets->convert(ember::DType::I64))};
}

template <typename M>
M load_torch(const M& model, const Options& o, const ember::record::LoadArgs& args) {
    if (o.init_from.empty()) return model;
    const ember::record::PyTorchFileRecorder<ember::record::FullPrecisionSettings> recorder;
    return recorder.load_into(model, args, ember::Device<B>{});
}

// Times `step` (which returns the loss) at every thread count; prints the losses of the first
// --loss-steps steps first (at the highest thread count: they are the slow part at one).
template <typename Step>
void time_steps(const Options& o, Step&& step) {
    for (std::size_t k = 0; k < o.loss_steps; ++k) {
        ember::cpu::set_num_threads(*std::max_element(o.threads.begin(), o.threads.end()));
        const double loss = double(step().into_scalar());
        std::printf(
            "{\"framework\": \"ember\", \"kind\": \"loss\", \"model\": \"%s\", "
            "\"batch\": %zu, \"step\": %zu, \"loss\": %.7g}\n",
            o.model.c_str(), o.batch, k, loss);
        std::fflush(stdout);
    }
    for (const std::size_t t : o.threads) {
        ember::cpu::set_num_threads(t);
        double loss = 0;
        const Timing tm = time_it(o, [&] { loss = double(step().into_scalar()); });
        print_timing(o, "train", t, tm, loss);
    }
}

template <typename M, typename Optim, typename Batch>
void train_classifier(const Options& o, M model, Optim optim, double lr, const Batch& batch) {
    time_steps(o, [&] {
        auto scores = model.forward(batch.first);
        auto loss =
            ember::nn::loss::CrossEntropyLossConfig{}.init<B>().forward(scores, batch.second);
        auto grads = ember::optim::GradientsParams::from_grads(loss.backward(), model);
        model = optim.step(lr, std::move(model), std::move(grads));
        return loss;
    });
}

void train(const Options& o) {
    B::seed(o.seed);
    const auto adam = ember::optim::AdamConfig{}.with_epsilon(1e-8);
    if (o.model == "mlp") {
        // train_torch.py's Mlp: nn.Sequential(Flatten, Linear, ReLU, Linear, ReLU, Linear).
        auto args = ember::record::LoadArgs(o.init_from)
                        .with_key_remap(R"(^net\.1\.)", "linear1.")
                        .with_key_remap(R"(^net\.3\.)", "linear2.")
                        .with_key_remap(R"(^net\.5\.)", "linear3.");
        auto model = load_torch(mnist::Mlp<B>::init(), o, args);
        train_classifier(o, model, adam.init<mnist::Mlp<B>>(), 1e-3,
                         batch_of<3>(o, {o.batch, 28, 28}, 10));
    } else if (o.model == "cnn") {
        auto model = load_torch(mnist::Cnn<B>::init(), o, ember::record::LoadArgs(o.init_from));
        train_classifier(o, model, adam.init<mnist::Cnn<B>>(), 1e-4,
                         batch_of<3>(o, {o.batch, 28, 28}, 10));
    } else if (o.model == "resnet") {
        auto model =
            load_torch(resnet::ResNetConfig{}.init<B>(), o, ember::record::LoadArgs(o.init_from));
        train_classifier(o, model, adam.init<resnet::ResNet<B>>(), 1e-3,
                         batch_of<4>(o, {o.batch, 3, 32, 32}, 10));
    } else {
        gpt::GptConfig c;
        c.dropout = 0;
        auto model = c.init<B>();
        if (!o.init_from.empty()) model = gpt::load_pytorch(model, o.init_from);
        auto optim = ember::optim::AdamWConfig{}
                         .with_beta_2(0.95)
                         .with_epsilon(1e-8)
                         .with_weight_decay(0.1)
                         .init<gpt::Gpt<B>>();
        const auto batch = gpt::bench_batch<B>(o.batch, o.seq, o.seed, {});
        time_steps(o, [&] {
            auto loss = model.loss(batch.inputs, batch.targets);
            auto grads = ember::optim::GradientsParams::from_grads(loss.backward(), model);
            model = optim.step(6e-4, std::move(model), std::move(grads));
            return loss;
        });
    }
}

}  // namespace

std::vector<std::size_t> parse_list(const std::string& s) {
    std::vector<std::size_t> out;
    for (std::size_t p = 0; p < s.size();) {
        const std::size_t q = std::min(s.find(',', p), s.size());
        if (q > p) out.push_back(std::stoul(s.substr(p, q - p)));
        p = q + 1;
    }
    return out;
}

void print_timing(const Options& o, const char* kind, std::size_t threads, const Timing& t,
                  std::optional<double> loss) {
    std::printf(
        "{\"framework\": \"ember\", \"kind\": \"%s\", \"model\": \"%s\", \"batch\": %zu, "
        "\"seq\": %zu, \"threads\": %zu, \"ms\": %.4f, \"ms_mean\": %.4f, \"ms_best\": %.4f, "
        "\"cpu_ms\": %.4f, \"reps\": %zu",
        kind, o.model.c_str(), o.batch, o.model == "gpt" ? o.seq : 0, threads, t.median * 1e3,
        t.mean * 1e3, t.best * 1e3, t.cpu * 1e3, t.reps);
    if (loss) std::printf(", \"loss\": %.7g", *loss);
    std::printf("}\n");
    std::fflush(stdout);
}

}  // namespace bench_scale

int main(int argc, char** argv) try {
    const auto o = bench_scale::parse(argc, argv);
    if (o.command == "train")
        bench_scale::train(o);
    else
        bench_scale::infer(o);
    return 0;
} catch (const std::exception& e) {
    std::cerr << "bench_scale: " << e.what() << '\n';
    return 1;
}
