// bench_scale_ops: the ops of one ResNet-18 (CIFAR form) training step at batch 64, timed one
// class at a time on ember's CPU backend (issue 37), beside benchmarks/cpu_scale_ops_torch.py on
// the same shapes. It says where a step's time goes: convolution forward, its input gradient
// (the transposed convolution Autodiff calls), its weight gradient, BatchNorm forward and
// backward (through nn::BatchNorm on Autodiff<Cpu>, as the model runs it), ReLU, the residual
// add, and Adam over ResNet-18's parameters. Named in --only, bn_relu and bn_add_relu time a
// block's BatchNorm with its ReLU (and the residual addition), forward and backward together.
//
//   bench_scale_ops [--threads 1] [--batch 64] [--min-time 0.3] [--only conv_fwd,bn_bwd,...]
//                   [--shape SUBSTRING]
//
// One JSON line per row, {"framework": "ember", "op", "shape", "count" (times a step runs it),
// "cpu_ms" (median process CPU time of one call: the machine may be shared), "wall_ms" (the
// fastest call's wall time), "threads"}, then one line per class with the totals Σ count·ms.
// bn_bwd is (forward + backward of Σ y·g) − forward, as the PyTorch script measures it.
// Benchmarks measure, they never assert.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <ember/ember.hpp>
#include <ember/nn.hpp>

#include "bench_ops_common.hpp"

namespace {

using C = ember::CpuBackend<float>;
using AD = ember::Autodiff<ember::Cpu>;
using FT = C::FT;

struct Conv {
    std::size_t cin, cout, k, stride, side, count;
};
// ResNet-18 in CIFAR form (cpu_scale_ops_torch.py's CONVS).
const Conv kConvs[] = {{3, 64, 3, 1, 32, 1},    {64, 64, 3, 1, 32, 4},   {64, 128, 3, 2, 32, 1},
                       {128, 128, 3, 1, 16, 3}, {64, 128, 1, 2, 32, 1},  {128, 256, 3, 2, 16, 1},
                       {256, 256, 3, 1, 8, 3},  {128, 256, 1, 2, 16, 1}, {256, 512, 3, 2, 8, 1},
                       {512, 512, 3, 1, 4, 3},  {256, 512, 1, 2, 8, 1}};
struct Act {
    std::size_t c, side, bns, relus, adds;
};
const Act kActs[] = {{64, 32, 5, 5, 2}, {128, 16, 5, 4, 2}, {256, 8, 5, 4, 2}, {512, 4, 5, 4, 2}};

using bench_ops::Opts;
using bench_ops::Time;
using bench_ops::timed;

FT randn(const ember::Shape& s, double sd = 1.0) {
    return C::float_random(s, ember::Distribution::Normal(0, sd), {});
}

}  // namespace

int main(int argc, char** argv) {
    Opts o;
    o.batch = 64;
    if (!bench_ops::parse(argc, argv, "bench_scale_ops", false, o)) return 2;
    ember::cpu::set_num_threads(o.threads);
    const std::size_t n = o.batch;
    bench_ops::Report report;
    report.threads = o.threads;
    auto want = [&](const char* op) { return o.only.empty() || o.only.count(op) > 0; };
    auto emit = [&](const char* op, const std::string& shape, std::size_t count, Time t) {
        report.emit(op, shape, count, t);
    };

    for (const Conv& c : kConvs) {
        const std::size_t pad = c.k / 2, oside = (c.side + 2 * pad - c.k) / c.stride + 1;
        const std::string shape = std::to_string(n) + "x" + std::to_string(c.cin) + "x" +
                                  std::to_string(c.side) + "x" + std::to_string(c.side) + "_" +
                                  std::to_string(c.cout) + "x" + std::to_string(c.k) + "x" +
                                  std::to_string(c.k) + "_s" + std::to_string(c.stride);
        if (shape.find(o.shape) == std::string::npos) continue;
        const FT x = randn({n, c.cin, c.side, c.side});
        const FT w = randn({c.cout, c.cin, c.k, c.k}, 0.05);
        const FT g = randn({n, c.cout, oside, oside});
        ember::ConvOptions<2> co;
        co.stride = {c.stride, c.stride};
        co.padding = {pad, pad};
        // The input gradient as Autodiff computes it: the transposed convolution of g.
        ember::ConvTransposeOptions<2> t;
        t.stride = co.stride;
        t.padding = co.padding;
        for (std::size_t i = 0; i < 2; ++i)
            t.padding_out[i] = c.side + 2 * pad - ((oside - 1) * c.stride + c.k);
        if (want("conv_fwd"))
            emit("conv_fwd", shape, c.count,
                 timed(o, [&] { (void)C::conv2d(x, w, std::nullopt, co); }));
        if (want("conv_bwd_data"))
            emit("conv_bwd_data", shape, c.count,
                 timed(o, [&] { (void)C::conv_transpose2d(g, w, std::nullopt, t); }));
        if (want("conv_bwd_weight"))
            emit("conv_bwd_weight", shape, c.count,
                 timed(o, [&] { (void)C::conv2d_weight_backward(x, g, C::float_shape(w), co); }));
    }

    for (const Act& a : kActs) {
        const std::string shape = std::to_string(n) + "x" + std::to_string(a.c) + "x" +
                                  std::to_string(a.side) + "x" + std::to_string(a.side);
        if (shape.find(o.shape) == std::string::npos) continue;
        const ember::Shape s{n, a.c, a.side, a.side};
        const FT x = randn(s), g = randn(s);
        if (want("bn_fwd") || want("bn_bwd")) {
            auto bn = ember::nn::BatchNormConfig{a.c}.init<AD>();
            const auto xt = ember::Tensor<AD, 4>::from_primitive(AD::from_inner(x));
            const auto gt = ember::Tensor<AD, 4>::from_primitive(AD::from_inner(g));
            const Time fwd = timed(o, [&] { (void)bn.forward(xt); });
            if (want("bn_fwd")) emit("bn_fwd", shape, a.bns, fwd);
            if (want("bn_bwd")) {
                const auto xg = xt.clone().require_grad();
                const Time both = timed(o, [&] { (void)(bn.forward(xg) * gt).sum().backward(); });
                emit("bn_bwd", shape, a.bns,
                     {std::max(both.cpu - fwd.cpu, 0.0), std::max(both.wall - fwd.wall, 0.0)});
            }
        }
        // Asked for by name only (not in the default classes, which the reports sum): a
        // block's BatchNorm with its ReLU, and with the residual addition too, forward and
        // backward of Σ y·g as the model runs them (nn::BatchNorm::forward_relu and
        // forward_add_relu: the fused kernels, or with EMBER_CPU_BATCH_NORM_RELU=0 the composed
        // batch norm, addition and ReLU).
        for (const bool add : {false, true}) {
            const char* op = add ? "bn_add_relu" : "bn_relu";
            if (!o.only.count(op)) continue;
            auto bn = ember::nn::BatchNormConfig{a.c}.init<AD>();
            const auto xg = ember::Tensor<AD, 4>::from_primitive(AD::from_inner(x)).require_grad();
            const auto rg =
                ember::Tensor<AD, 4>::from_primitive(AD::from_inner(randn(s))).require_grad();
            const auto gt = ember::Tensor<AD, 4>::from_primitive(AD::from_inner(g));
            emit(op, shape, add ? a.adds : a.relus - a.adds, timed(o, [&] {
                     auto y = add ? bn.forward_add_relu(xg, rg) : bn.forward_relu(xg);
                     (void)(y * gt).sum().backward();
                 }));
        }
        if (want("relu_fwd"))
            emit("relu_fwd", shape, a.relus,
                 timed(o, [&] { (void)C::float_unary(ember::UnaryOp::Relu, x); }));
        if (want("relu_bwd")) {
            // As Autodiff's rule for relu runs it: the backend's one-pass gradient where it has
            // one, else the gradient zeroed where the output is <= 0.
            const FT y = C::float_unary(ember::UnaryOp::Relu, x);
            emit(
                "relu_bwd", shape, a.relus, timed(o, [&] {
                    if constexpr (requires { C::float_unary_backward(ember::UnaryOp::Relu, g, y); })
                        if (auto d = C::float_unary_backward(ember::UnaryOp::Relu, g, y)) return;
                    auto m = C::float_compare_scalar(ember::CompareOp::Le, y, ember::Scalar(0.0));
                    (void)C::float_mask_fill(g, std::move(m), ember::Scalar(0.0));
                }));
        }
        if (want("add"))
            emit("add", shape, a.adds,
                 timed(o, [&] { (void)C::float_binary(ember::BinaryOp::Add, x, g); }));
    }

    if (want("adam")) {
        // ResNet-18's parameter tensors: each conv weight, each BatchNorm's gamma and beta, fc.
        std::vector<ember::Shape> shapes;
        for (const Conv& c : kConvs)
            for (std::size_t i = 0; i < c.count; ++i) {
                shapes.push_back({c.cout, c.cin, c.k, c.k});
                shapes.push_back({c.cout});
                shapes.push_back({c.cout});
            }
        shapes.push_back({10, 512});
        shapes.push_back({10});
        std::size_t total = 0;
        std::vector<std::array<FT, 4>> st;
        for (const auto& s : shapes) {
            total += s.num_elements();
            st.push_back({randn(s), randn(s, 1e-3), C::float_full(s, ember::Scalar(0.0), {}),
                          C::float_full(s, ember::Scalar(0.0), {})});
        }
        ember::AdamStepScalars sc{};
        sc.lr = 1e-3;
        sc.beta_1 = 0.9;
        sc.beta_2 = 0.999;
        sc.epsilon = 1e-8;
        sc.correction_1 = 0.1;
        sc.correction_2 = 0.001;
        emit("adam",
             std::to_string(total) + "_params_" + std::to_string(shapes.size()) + "_tensors", 1,
             timed(o, [&] {
                 for (auto& t : st) {
                     auto r = C::float_adam_step(std::move(t[0]), t[1], std::move(t[2]),
                                                 std::move(t[3]), sc);
                     t[0] = std::move(r[0]);
                     t[2] = std::move(r[1]);
                     t[3] = std::move(r[2]);
                 }
             }));
    }
    report.print_totals();
    return 0;
}
