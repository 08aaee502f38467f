// bench_scale infer: forward passes of the models of cpu_scale.sh as ember-onnx imports their
// ONNX graphs (cpu_scale_torch.py export): generated C++ on plain Cpu, no autodiff. The graphs
// are compiled in when the build was configured with BENCH_SCALE_ONNX_DIR (cpu_scale.sh build
// does it); without them the command says so and fails.
//
// Weights: --init-from RECORD (the .mpk ember-onnx wrote beside the header) loads the exported
// ones; without it the generated Model's own initialisation is used, which times the same (the
// GPU machine gets the binary without the 400 MB of records). With --init-from RECORD and
// --batch-from DIR/<model>.check.pt (export's input "x" and PyTorch's output "y" for it), it
// times nothing and prints the largest difference from PyTorch's output over three passes of
// that batch and of its first sample alone instead (the weights are packed for the GEMM at the
// second).
#include <cmath>
#include <cstdio>
#include <optional>
#include <stdexcept>

#include <ember/ember.hpp>
#include <ember/record/pytorch.hpp>

#include "bench_scale.hpp"

#if BENCH_SCALE_ONNX
#include "onnx_cnn.hpp"
#include "onnx_gpt.hpp"
#include "onnx_mlp.hpp"
#include "onnx_resnet.hpp"
#endif

namespace bench_scale {

#if BENCH_SCALE_ONNX
namespace {

using B = ember::Cpu;

// PyTorch's input and output of cpu_scale_torch.py export's check file ("x", "y").
struct Check {
    ember::TensorData x, y;
};

Check read_check(const std::string& file) {
    std::optional<ember::TensorData> x, y;
    for (auto& [name, data] : ember::record::read_pytorch_tensors(file)) {
        if (name == "x") x = std::move(data);
        if (name == "y") y = std::move(data);
    }
    EMBER_CHECK(x && y, Format, "bench_scale infer: ", file, " must hold 'x' and 'y'");
    return {std::move(*x), std::move(*y)};
}

template <typename Model, typename Input>
void run(const Options& o, const Input& x, ember::DType in_dtype = ember::DType::F32) {
    const auto model = o.init_from.empty() ? Model{} : Model::from_file(o.init_from);
    if (!o.batch_from.empty()) {
        // The import checked against PyTorch: same weights (the record), same input.
        const Check c = read_check(o.batch_from);
        // Three passes, the largest difference of any: the CPU backend packs a model's weights
        // for its GEMM once, at the second pass, and the third reads them packed.
        const auto in = Input::from_data(c.x.convert(in_dtype));
        const auto want = c.y.convert(ember::DType::F32).to_vec<float>();
        // The file's batch, and its first sample alone (batch 1 takes other paths: a late
        // ResNet layer's product of 16 positions), against the first rows of PyTorch's output.
        const auto first = Input(in.slice({{0, 1}}));
        const std::size_t batch = in.dims()[0];
        double diff = 0, scale = 0;
        for (int pass = 0; pass < 3; ++pass) {
            for (const bool one : {false, true}) {
                const auto got =
                    model.forward(one ? first : in).into_data().template to_vec<float>();
                const std::size_t n = one ? want.size() / batch : want.size();
                EMBER_CHECK(got.size() == n, Shape, "bench_scale infer: ", got.size(),
                            " outputs, PyTorch's file has ", n);
                for (std::size_t i = 0; i < n; ++i) {
                    diff = std::max(diff, double(std::abs(got[i] - want[i])));
                    scale = std::max(scale, double(std::abs(want[i])));
                }
            }
        }
        std::printf(
            "{\"framework\": \"ember\", \"kind\": \"check\", \"model\": \"%s\", "
            "\"max_abs_diff\": %.3g, \"max_abs\": %.3g}\n",
            o.model.c_str(), diff, scale);
        return;
    }
    double sum = 0;
    for (const std::size_t t : o.threads) {
        ember::cpu::set_num_threads(t);
        const Timing tm = time_it(o, [&] { sum = double(model.forward(x).sum().into_scalar()); });
        print_timing(o, "infer", t, tm);
    }
}

}  // namespace

void infer(const Options& o) {
    B::seed(o.seed);
    // Inputs as cpu_scale_torch.py's: standard-normal images, seeded byte tokens.
    auto normal = ember::Distribution::Normal(0, 1);
    if (o.model == "mlp" || o.model == "cnn") {
        const auto x = ember::Tensor<B, 3>::random(ember::Shape{o.batch, 28, 28}, normal);
        if (o.model == "mlp")
            run<onnx_mlp::Model<B>>(o, x);
        else
            run<onnx_cnn::Model<B>>(o, x);
    } else if (o.model == "resnet") {
        run<onnx_resnet::Model<B>>(
            o, ember::Tensor<B, 4>::random(ember::Shape{o.batch, 3, 32, 32}, normal));
    } else {
        EMBER_CHECK(o.seq == BENCH_SCALE_GPT_SEQ, Argument,
                    "bench_scale infer: the GPT graph was "
                    "exported for ",
                    BENCH_SCALE_GPT_SEQ, " tokens, --seq says ", o.seq);
        const auto tokens = ember::Tensor<B, 2>::random(ember::Shape{o.batch, o.seq},
                                                        ember::Distribution::Uniform(0, 256))
                                .int_();
        run<onnx_gpt::Model<B>>(o, tokens, ember::DType::I64);
    }
}
#else
void infer(const Options&) {
    throw ember::ArgumentError(
        "bench_scale infer: this build has no ONNX models (configure with BENCH_SCALE_ONNX_DIR, "
        "as benchmarks/cpu_scale.sh build does)");
}
#endif

}  // namespace bench_scale
