// CUDA's fused batch norm (backends/cuda/batch_norm.cu) and multi-tensor Adam and SGD steps
// (backends/cuda/adam_multi.cu). The PyTorch fixtures of nn::BatchNorm run on the CUDA stacks in
// test_nn_general.cpp; here: gradients against f64 finite differences on the GPU, agreement with
// the CPU's BatchNorm (its own kernels since 706f694, checked against PyTorch's fixtures and
// finite differences there) on larger, offset, odd-sized and bf16 inputs, stored contiguous and
// channels-last (whose output stays channels-last), the eval kernel, and
// the multi-tensor Adam/AdamW/SGD steps against the per-parameter ones. The GPU cases skip
// without a device; the Dispatch cases (its per-tensor fallbacks of float_adam_steps and
// float_sgd_steps) run everywhere.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include <ember/nn/linear.hpp>
#include <ember/nn/norm.hpp>
#include <ember/optim.hpp>

#include "harness.hpp"
#include "module_check.hpp"

#if defined(EMBER_CUDA)
#include "cuda_harness.hpp"
#endif

namespace test_cuda_batch_norm {

namespace {

using ember::DType;
using ember::Shape;
using ember::Tensor;
using ember::TensorData;
namespace nn = ember::nn;
namespace optim = ember::optim;

// A small network whose parameters have several ranks and sizes (odd ones too).
template <ember::Backend B>
struct Net {
    nn::Linear<B> a;
    nn::Linear<B> b;
    EMBER_MODULE(Net, a, b)

    Tensor<B, 1> loss(const Tensor<B, 2>& x) const {
        auto y = b.forward(a.forward(x).tanh());
        return (y * y).sum();
    }
};

template <ember::Backend B>
Net<B> make_net(const ember::Device<B>& d) {
    B::seed(11);
    return Net<B>{nn::LinearConfig{37, 129}.init<B>(d), nn::LinearConfig{129, 5}.init<B>(d)};
}

// `steps` updates of `net` by `opt` on a fixed batch; the parameters afterwards.
template <typename B, typename O>
std::vector<TensorData> train(Net<B> net, O opt, const ember::Device<B>& d, int steps) {
    auto x = Tensor<B, 2>::from_data(
        Tensor<ember::Cpu, 2>::random({16, 37}, ember::Distribution::Normal(0, 1)).to_data(), d);
    for (int i = 0; i < steps; ++i) {
        auto grads = ember::optim::GradientsParams::from_grads(net.loss(x).backward(), net);
        net = opt.step(1e-2, std::move(net), std::move(grads));
    }
    std::vector<TensorData> out;
    net.visit([&](std::string_view, const auto& p) { out.push_back(p.val().to_data()); });
    return out;
}

// Multi-tensor and per-parameter steps of Adam (L2 decay), AdamW and SGD with momentum on stack
// B: equal values. The first of SGD's steps starts each velocity at the gradient (dampening
// left out, as PyTorch's), the later ones take the fused update.
template <typename B>
void check_multi_tensor(const ember::Device<B>& d) {
    auto compare = [&](auto config) {
        ember::Cpu::seed(5);
        auto multi = config.template init<Net<B>>();
        auto single = config.template init<Net<B>>();
        single.multi_tensor(false);
        const auto a = train(make_net<B>(d), multi, d, 3);
        ember::Cpu::seed(5);
        const auto b = train(make_net<B>(d), single, d, 3);
        REQUIRE(a.size() == b.size());
        for (std::size_t i = 0; i < a.size(); ++i)
            ember::test::check_close(a[i], b[i], {1e-7, 1e-6});
    };
    SECTION("Adam with L2 weight decay") {
        compare(optim::AdamConfig{}.with_weight_decay(optim::WeightDecayConfig{0.01}));
    }
    SECTION("AdamW") {
        compare(optim::AdamWConfig{}.with_weight_decay(0.05));
    }
    SECTION("SGD with momentum, dampening and weight decay") {
        compare(optim::SgdConfig{}
                    .with_momentum(optim::MomentumConfig{0.9, 0.1, false})
                    .with_weight_decay(optim::WeightDecayConfig{5e-4}));
    }
    SECTION("SGD with Nesterov momentum") {
        compare(optim::SgdConfig{}.with_momentum(optim::MomentumConfig{0.8, 0.0, true}));
    }
}

}  // namespace

TEST_CASE("multi-tensor Adam and SGD on Dispatch's CPU stack equal the per-parameter steps",
          "[optim]") {
    check_multi_tensor<ember::Dispatch>(ember::DispatchDevice::cpu().autodiff());
}

TEST_CASE("BatchNorm forward_relu and forward_add_relu", "[nn][batchnorm]") {
    // x [2, 2, 1, 3]: channel 0 holds 1..6 over the batch, channel 1 the same negated and
    // shifted; gamma 1, beta 0, so y = relu((x − mean)/√(var + ε) + r), worked out here in
    // double from the definition (biased variance).
    using B = ember::Autodiff<ember::Cpu>;
    const std::vector<float> xs{1, 2, 3, -1, -3, -5, 4, 5, 6, -7, -9, -11};
    const std::vector<float> rs{0.5f, -0.5f, 0.f,   1.f, -2.f, 0.25f,
                                -1.f, 0.f,   0.75f, 0.f, 2.f,  -0.25f};
    const Shape shape{2, 2, 1, 3};
    auto want = [&](bool residual) {
        std::vector<double> y(xs.size());
        for (std::size_t c = 0; c < 2; ++c) {
            double sum = 0, sq = 0;
            for (std::size_t n = 0; n < 2; ++n)
                for (std::size_t i = 0; i < 3; ++i) sum += xs[(n * 2 + c) * 3 + i];
            const double mean = sum / 6;
            for (std::size_t n = 0; n < 2; ++n)
                for (std::size_t i = 0; i < 3; ++i) {
                    const double d = xs[(n * 2 + c) * 3 + i] - mean;
                    sq += d * d;
                }
            const double rstd = 1 / std::sqrt(sq / 6 + 1e-5);
            for (std::size_t n = 0; n < 2; ++n)
                for (std::size_t i = 0; i < 3; ++i) {
                    const std::size_t at = (n * 2 + c) * 3 + i;
                    const double v = (xs[at] - mean) * rstd + (residual ? rs[at] : 0.0);
                    y[at] = v > 0 ? v : 0;
                }
        }
        return TensorData(y, shape);
    };
    auto bn = nn::BatchNormConfig{2}.init<B>();
    const auto x = Tensor<B, 4>::from_data(TensorData(xs, shape));
    const auto r = Tensor<B, 4>::from_data(TensorData(rs, shape));
    ember::test::check_close(bn.forward_relu(x).to_data(), want(false), {1e-5, 1e-6});
    ember::test::check_close(bn.forward_add_relu(x, r).to_data(), want(true), {1e-5, 1e-6});
    // Inference (running statistics) composes on every backend: relu(forward(x) + r).
    auto valid = nn::BatchNormConfig{2}.init<ember::Cpu>();
    const auto xv = Tensor<ember::Cpu, 4>::from_data(TensorData(xs, shape));
    const auto rv = Tensor<ember::Cpu, 4>::from_data(TensorData(rs, shape));
    ember::test::check_close(valid.forward_add_relu(xv, rv).to_data(),
                             ember::activation::relu(valid.forward(xv) + rv).to_data(), {0, 0});
    CHECK_THROWS_AS(bn.forward_add_relu(x, Tensor<B, 4>::ones({2, 2, 1, 2})), ember::ShapeError);
}

#if defined(EMBER_CUDA)

namespace {

using AdCuda = ember::Autodiff<ember::Cuda>;

TensorData offset_data(const ember::Shape& shape, double mean, std::uint64_t seed) {
    ember::Cpu::seed(seed);
    return Tensor<ember::Cpu, 4>::random(shape, ember::Distribution::Normal(mean, 2.0)).to_data();
}

/// Which of BatchNorm's forwards bn_run calls.
/// A shape, its dtype and the tolerance against the CPU's result.
struct ShapeCase {
    ember::Shape shape;
    DType dtype;
    ember::Tolerance tol;
};

enum class BnMode { Plain, Relu, AddRelu };

// BatchNorm's output and the gradients of x, gamma, beta for L = Σ y·w, on stack B with x in
// `dtype` (stored channels-last with `cl`); each as f32 data. Relu: y = forward_relu(x);
// AddRelu: y = forward_add_relu(x, r) with r = r0 in `dtype` (tracked: its gradient is last).
// With `autocast`, the forward runs under bf16 autocast, as in a model: the composed ops then
// normalise in f32 and round the output to bf16 before adding r (the fused kernels' order).
template <typename B>
std::vector<TensorData> bn_run(const TensorData& x0, const TensorData& w0, DType dtype,
                               bool cl = false, BnMode mode = BnMode::Plain,
                               const ember::Device<B>& d = {}, const TensorData* r0 = nullptr,
                               bool autocast = false) {
    const std::size_t c = x0.shape()[1];
    ember::Cpu::seed(3);
    const auto gd = Tensor<ember::Cpu, 1>::random({c}, ember::Distribution::Uniform(0.5, 1.5));
    const auto bd = Tensor<ember::Cpu, 1>::random({c}, ember::Distribution::Uniform(-1, 1));
    auto bn = nn::BatchNormConfig{c}.init<B>(d);
    bn.gamma = ember::Param<Tensor<B, 1>>(Tensor<B, 1>::from_data(gd.to_data(), d));
    bn.beta = ember::Param<Tensor<B, 1>>(Tensor<B, 1>::from_data(bd.to_data(), d));
    auto xs = Tensor<B, 4>::from_data(x0, d);
    if (cl) xs = ember::test::channels_last(xs);
    auto x = xs.cast(dtype).require_grad();
    auto w = Tensor<B, 4>::from_data(w0, d).cast(dtype);
    auto r = (r0 ? Tensor<B, 4>::from_data(*r0, d).cast(dtype) : w).detach().require_grad();
    std::optional<ember::Autocast> guard;
    if (autocast) guard.emplace(DType::BF16);
    auto y = mode == BnMode::Plain  ? bn.forward(x)
             : mode == BnMode::Relu ? bn.forward_relu(x)
                                    : bn.forward_add_relu(x, r);
    guard.reset();
    // The fused kernels keep the layout (the composed ops, EMBER_CUDA_BATCH_NORM=0, need not).
    if constexpr (std::is_same_v<B, AdCuda>)
        if (cl && !std::getenv("EMBER_CUDA_BATCH_NORM"))
            CHECK(ember::test::stored_channels_last(y));
    auto grads = (y.cast(DType::F32) * w.cast(DType::F32)).sum().backward();
    std::vector<TensorData> out{
        y.cast(DType::F32).to_data(),          x.grad(grads)->cast(DType::F32).to_data(),
        bn.gamma.val().grad(grads)->to_data(), bn.beta.val().grad(grads)->to_data(),
        bn.running_mean.value().to_data(),     bn.running_var.value().to_data()};
    if (mode == BnMode::AddRelu) out.push_back(r.grad(grads)->cast(DType::F32).to_data());
    return out;
}

}  // namespace

TEST_CASE("cuda batch norm: gradients match f64 finite differences", "[cuda][batchnorm]") {
    REQUIRE_GPU();
    // [N, C, HW]: odd positions (the scalar kernels) and HW % 4 == 0 (the vector ones).
    for (const ember::Shape shape : {ember::Shape{3, 2, 5, 1}, ember::Shape{4, 3, 2, 2}}) {
        INFO("shape " << shape.to_string());
        ember::Cpu::seed(9);
        const auto xd =
            Tensor<ember::Cpu, 4>::random(shape, ember::Distribution::Normal(1, 2)).to_data();
        const auto wd =
            Tensor<ember::Cpu, 4>::random(shape, ember::Distribution::Uniform(-1, 1)).to_data();
        const std::size_t c = shape[1];
        ember::Cpu::seed(4);
        const auto gd =
            Tensor<ember::Cpu, 1>::random({c}, ember::Distribution::Uniform(0.5, 1.5)).to_data();
        const auto bd =
            Tensor<ember::Cpu, 1>::random({c}, ember::Distribution::Uniform(-1, 1)).to_data();
        // L(x, gamma, beta) in f64 on the GPU, through the training-mode kernels, with `h`
        // added to element `i` of operand `k` (0 x, 1 gamma, 2 beta; -1 none) in f64: a one-hot
        // f64 tensor times h, as data enters the backend as f32.
        const std::vector<TensorData> inputs{xd, gd, bd};
        auto f64 = [&](int k, int which, std::size_t i, double h) {
            const TensorData& d = inputs[static_cast<std::size_t>(which)];
            const auto vals = d.template to_vec<float>();
            auto t =
                Tensor<AdCuda, 1>::from_data(TensorData(vals, Shape{vals.size()})).cast(DType::F64);
            if (k != which) return t;
            std::vector<float> hot(d.num_elements(), 0.f);
            hot[i] = 1.f;
            return t + Tensor<AdCuda, 1>::from_data(TensorData(hot, Shape{hot.size()}))
                               .cast(DType::F64) *
                           h;
        };
        auto loss = [&](int k, std::size_t i, double h,
                        bool track) -> std::pair<double, std::vector<TensorData>> {
            auto bn = nn::BatchNormConfig{c}.init<AdCuda>();
            bn.gamma = ember::Param<Tensor<AdCuda, 1>>(f64(k, 1, i, h));
            bn.beta = ember::Param<Tensor<AdCuda, 1>>(f64(k, 2, i, h));
            auto xt = f64(k, 0, i, h).reshape<4>(shape);
            if (track) xt = xt.require_grad();
            auto w = Tensor<AdCuda, 4>::from_data(wd).cast(DType::F64);
            auto l = (bn.forward(xt) * w).sum();
            const double v = l.cast(DType::F64).to_data().template to_vec<double>()[0];
            if (!track) return {v, {}};
            auto grads = l.backward();
            return {v,
                    {xt.grad(grads)->to_data(), bn.gamma.val().grad(grads)->to_data(),
                     bn.beta.val().grad(grads)->to_data()}};
        };
        const auto analytic = loss(-1, 0, 0.0, true).second;
        for (int k = 0; k < 3; ++k) {
            const auto got = analytic[static_cast<std::size_t>(k)].template to_vec<double>();
            REQUIRE(got.size() == inputs[static_cast<std::size_t>(k)].num_elements());
            for (std::size_t i = 0; i < got.size(); ++i) {
                const double h = 1e-4;
                const double fd =
                    (loss(k, i, h, false).first - loss(k, i, -h, false).first) / (2 * h);
                INFO("operand " << k << " element " << i);
                CHECK(got[i] == Approx(fd).epsilon(1e-5).margin(1e-6));
            }
        }
    }
}

TEST_CASE("cuda batch norm: kernels agree with the CPU's BatchNorm", "[cuda][batchnorm]") {
    REQUIRE_GPU();
    struct Case {
        ember::Shape shape;
        double mean;
        DType dtype;
        ember::Tolerance tol;
    };
    const std::vector<Case> cases{
        {{8, 16, 12, 12}, 0.0, DType::F32, {1e-4, 1e-4}},
        // a large mean: the shifted sums keep the variance's precision
        {{8, 16, 12, 12}, 300.0, DType::F32, {1e-3, 1e-3}},
        {{5, 7, 3, 3}, -2.0, DType::F32, {1e-4, 1e-4}},   // odd sizes: scalar kernels
        {{64, 4, 1, 1}, 1.0, DType::F32, {1e-4, 1e-4}},   // [N, C] as BatchNorm1d
        {{8, 16, 8, 8}, 0.5, DType::BF16, {3e-2, 3e-2}},  // bf16 data, f32 statistics
        {{6, 5, 7, 3}, 0.5, DType::F16, {1e-2, 1e-2}},
    };
    for (const auto& k : cases) {
        INFO("shape " << k.shape.to_string() << ", mean " << k.mean << ", "
                      << ember::dtype_name(k.dtype));
        const auto x = offset_data(k.shape, k.mean, 21);
        const auto w = offset_data(k.shape, 0.0, 22);
        // The reference: the CPU's BatchNorm on the same dtype-rounded input, in f32.
        const auto xr =
            Tensor<ember::Cpu, 4>::from_data(x).cast(k.dtype).cast(DType::F32).to_data();
        const auto wr =
            Tensor<ember::Cpu, 4>::from_data(w).cast(k.dtype).cast(DType::F32).to_data();
        const auto want = bn_run<ember::Autodiff<ember::Cpu>>(xr, wr, DType::F32);
        const auto got = bn_run<AdCuda>(x, w, k.dtype);
        const auto fused = bn_run<ember::Autodiff<ember::Fusion<ember::Cuda>>>(x, w, k.dtype);
        // x stored channels-last: the [N·HW, C] kernels
        const auto cl = bn_run<AdCuda>(x, w, k.dtype, true);
        const char* what[] = {"y", "dx", "dgamma", "dbeta", "running_mean", "running_var"};
        for (std::size_t i = 0; i < want.size(); ++i) {
            INFO(what[i]);
            ember::test::check_close(got[i], want[i], k.tol);
            ember::test::check_close(fused[i], want[i], k.tol);
            ember::test::check_close(cl[i], want[i], k.tol);
        }
    }
}

TEST_CASE("cuda batch norm: the tiled channels-last kernels agree with the CPU's BatchNorm",
          "[cuda][batchnorm]") {
    REQUIRE_GPU();
    // Channels-last shapes of the tiled sums (a block covers up to 8 16-byte groups of channels
    // over a range of rows; the last block of a tile to finish adds up the splits and writes
    // the statistics; two tiles at least) and of the register elementwise kernels (channel
    // groups dividing 256): a partial last tile, several tiles, many splits, and beside them a
    // single tile and channels not a multiple of the vector (the earlier kernels), each plain,
    // with the ReLU, and with residual + ReLU (bf16 under autocast, as in a model).
    const std::vector<ShapeCase> cases{
        {{4, 24, 6, 6}, DType::BF16, {3e-2, 3e-2}},    // 3 groups, one tile: earlier kernels
        {{3, 40, 5, 7}, DType::F32, {1e-4, 1e-4}},     // 10 groups: a full tile and a partial one
        {{6, 48, 5, 5}, DType::F32, {1e-4, 1e-4}},     // 12 groups of 4 f32: 2 tiles
        {{2, 512, 4, 4}, DType::BF16, {3e-2, 3e-2}},   // 8 tiles, register kernels
        {{64, 64, 8, 8}, DType::F32, {1e-4, 1e-4}},    // 2 tiles, many splits
        {{32, 128, 8, 8}, DType::BF16, {3e-2, 3e-2}},  // 2 tiles, many splits, bf16
        {{5, 12, 4, 4}, DType::BF16, {3e-2, 3e-2}},    // 12 channels: no 16-byte vectors
    };
    for (const auto& k : cases)
        for (const BnMode mode : {BnMode::Plain, BnMode::Relu, BnMode::AddRelu}) {
            INFO("shape " << k.shape.to_string() << ", " << ember::dtype_name(k.dtype) << ", mode "
                          << static_cast<int>(mode));
            const auto x = offset_data(k.shape, 0.7, 61);
            const auto w = offset_data(k.shape, 0.0, 62);
            const auto r = offset_data(k.shape, 0.0, 63);
            const bool ac = k.dtype == DType::BF16;
            const auto want =
                bn_run<ember::Autodiff<ember::Cpu>>(x, w, k.dtype, false, mode, {}, &r, ac);
            const auto got = bn_run<AdCuda>(x, w, k.dtype, true, mode, {}, &r, ac);
            // Again, and with the mask recomputed from x: the sums come in a fixed order (the
            // tickets reset themselves), so the same results bit for bit where the mask is read.
            const auto again = bn_run<AdCuda>(x, w, k.dtype, true, mode, {}, &r, ac);
            ::setenv("EMBER_CUDA_BN_MASK", "recompute", 1);
            const auto recomputed = bn_run<AdCuda>(x, w, k.dtype, true, mode, {}, &r, ac);
            ::unsetenv("EMBER_CUDA_BN_MASK");
            const char* what[] = {"y",           "dx",       "dgamma", "dbeta", "running_mean",
                                  "running_var", "dresidual"};
            REQUIRE(got.size() == want.size());
            for (std::size_t i = 0; i < want.size(); ++i) {
                INFO(what[i]);
                ember::test::check_close(got[i], want[i], k.tol);
                ember::test::check_close(recomputed[i], want[i], k.tol);
                ember::test::check_close(again[i], got[i], {0, 0});
            }
        }
}

TEST_CASE("cuda batch norm with the ReLU (and residual) fused agrees with the CPU's composed ops",
          "[cuda][batchnorm]") {
    REQUIRE_GPU();
    const std::vector<ShapeCase> cases{
        {{8, 16, 12, 12}, DType::F32, {1e-4, 1e-4}},  // vector kernels, both layouts
        {{5, 7, 3, 3}, DType::F32, {1e-4, 1e-4}},     // odd sizes: scalar kernels
        // bf16 data and residual under autocast on both sides: f32 statistics and arithmetic,
        // bn(x) rounded to bf16 before the residual is added
        {{8, 16, 8, 8}, DType::BF16, {3e-2, 3e-2}},
    };
    // Twice: the backward's ReLU mask read from the forward's output (the default), then
    // recomputed from x where there is no residual (EMBER_CUDA_BN_MASK=recompute).
    for (const char* mask : {"read", "recompute"})
        for (const auto& k : cases) {
            ::setenv("EMBER_CUDA_BN_MASK", mask, 1);
            for (const BnMode mode : {BnMode::Relu, BnMode::AddRelu}) {
                INFO("shape " << k.shape.to_string() << ", " << ember::dtype_name(k.dtype)
                              << (mode == BnMode::Relu ? ", relu" : ", add + relu") << ", mask "
                              << mask);
                const auto x = offset_data(k.shape, 0.3, 41);
                const auto w = offset_data(k.shape, 0.0, 42);
                const auto r = offset_data(k.shape, 0.0, 43);
                // The CPU has no fused kernel: forward_relu there is forward, + r, relu; in bf16
                // under autocast, as the model runs them (the ReLU's mask then agrees: the same
                // bf16 sum on both sides).
                const bool ac = k.dtype == DType::BF16;
                const auto want =
                    bn_run<ember::Autodiff<ember::Cpu>>(x, w, k.dtype, false, mode, {}, &r, ac);
                const auto got = bn_run<AdCuda>(x, w, k.dtype, false, mode, {}, &r, ac);
                const auto cl = bn_run<AdCuda>(x, w, k.dtype, true, mode, {}, &r, ac);
                const auto dispatch = bn_run<ember::Dispatch>(
                    x, w, k.dtype, true, mode, ember::DispatchDevice::parse("cuda:0+autodiff"), &r,
                    ac);
                const char* what[] = {"y",           "dx",       "dgamma", "dbeta", "running_mean",
                                      "running_var", "dresidual"};
                REQUIRE(got.size() == want.size());
                for (std::size_t i = 0; i < want.size(); ++i) {
                    INFO(what[i]);
                    ember::test::check_close(got[i], want[i], k.tol);
                    ember::test::check_close(cl[i], want[i], k.tol);
                    ember::test::check_close(dispatch[i], want[i], k.tol);
                }
            }
            ::unsetenv("EMBER_CUDA_BN_MASK");
        }
    SECTION("a residual of another shape is a ShapeError naming both") {
        auto bn = nn::BatchNormConfig{3}.init<AdCuda>();
        auto x = Tensor<AdCuda, 4>::ones({2, 3, 4, 4});
        CHECK_THROWS_WITH(bn.forward_add_relu(x, Tensor<AdCuda, 4>::ones({2, 3, 4, 2})),
                          Catch::Contains("forward_add_relu") && Catch::Contains("[2, 3, 4, 2]"));
        CHECK_THROWS_WITH(
            AdCuda::float_batch_norm_relu(
                x.primitive(), Tensor<AdCuda, 1>::ones({3}).primitive(),
                Tensor<AdCuda, 1>::ones({3}).primitive(), Tensor<AdCuda, 1>::ones({3}).primitive(),
                Tensor<AdCuda, 1>::ones({3}).primitive(),
                Tensor<AdCuda, 4>::ones({2, 3, 1, 4}).primitive(), {1e-5, 0.1}),
            Catch::Contains("batch_norm_relu") && Catch::Contains("residual"));
    }
}

TEST_CASE(
    "cuda batch norm with a residual rounds bn(x) to bf16 before adding it, as the composed "
    "ops do",
    "[cuda][batchnorm]") {
    REQUIRE_GPU();
    // The composed ops under autocast (EMBER_CUDA_BATCH_NORM=0, read at each call) round batch
    // norm's output to bf16 and then the sum, as PyTorch's does; a fused sum rounded once differs
    // by an ulp in about one element in eight (up to half the value where bn(x) ≈ -r), which the
    // ResNet test's gradients amplified to 14 %. Both layouts, both kernels (scalar and vector).
    for (const bool cl : {false, true})
        for (const ember::Shape shape : {ember::Shape{4, 4, 8, 8}, ember::Shape{3, 8, 5, 3}}) {
            INFO("shape " << shape.to_string() << (cl ? ", channels-last" : ""));
            const auto x = offset_data(shape, 0.3, 51);
            const auto w = offset_data(shape, 0.0, 52);
            const auto r = offset_data(shape, 0.0, 53);
            ::setenv("EMBER_CUDA_BATCH_NORM", "0", 1);
            const auto composed =
                bn_run<AdCuda>(x, w, DType::BF16, cl, BnMode::AddRelu, {}, &r, true);
            ::unsetenv("EMBER_CUDA_BATCH_NORM");
            const auto fused = bn_run<AdCuda>(x, w, DType::BF16, cl, BnMode::AddRelu, {}, &r, true);
            // The outputs: equal but where the two sides' f32 bn(x) (computed in another order)
            // straddle a bf16 rounding boundary, which is rare (0 or 1 element here).
            const auto a = fused[0].to_vec<float>(), b = composed[0].to_vec<float>();
            std::size_t differ = 0;
            for (std::size_t i = 0; i < a.size(); ++i) differ += a[i] != b[i];
            INFO(differ << " of " << a.size() << " outputs differ");
            CHECK(differ * 200 <= a.size());
            // The gradients: the same mask and the same dy, f32 arithmetic on both sides.
            const char* what[] = {"y",           "dx",       "dgamma", "dbeta", "running_mean",
                                  "running_var", "dresidual"};
            for (std::size_t i = 1; i < fused.size(); ++i) {
                INFO(what[i]);
                ember::test::check_close(fused[i], composed[i], {2e-2, 2e-2});
            }
        }
}

TEST_CASE("cuda batch norm: eval mode runs one kernel with the running statistics",
          "[cuda][batchnorm]") {
    REQUIRE_GPU();
    const ember::Shape shape{4, 6, 5, 4};
    const auto x = offset_data(shape, 1.0, 31);
    auto model = nn::BatchNormConfig{6}.init<ember::Cpu>();
    ember::Cpu::seed(2);
    model.running_mean = ember::RunningState<Tensor<ember::Cpu, 1>>(
        Tensor<ember::Cpu, 1>::random({6}, ember::Distribution::Normal(0, 1)));
    model.running_var = ember::RunningState<Tensor<ember::Cpu, 1>>(
        Tensor<ember::Cpu, 1>::random({6}, ember::Distribution::Uniform(0.5, 2)));
    const auto want = model.forward(Tensor<ember::Cpu, 4>::from_data(x)).to_data();
    nn::BatchNorm<ember::Cuda> g{
        ember::Param<Tensor<ember::Cuda, 1>>(
            Tensor<ember::Cuda, 1>::from_data(model.gamma.val().to_data())),
        ember::Param<Tensor<ember::Cuda, 1>>(
            Tensor<ember::Cuda, 1>::from_data(model.beta.val().to_data())),
        ember::RunningState<Tensor<ember::Cuda, 1>>(
            Tensor<ember::Cuda, 1>::from_data(model.running_mean.value().to_data())),
        ember::RunningState<Tensor<ember::Cuda, 1>>(
            Tensor<ember::Cuda, 1>::from_data(model.running_var.value().to_data())),
        model.momentum,
        model.epsilon};
    ember::test::check_close(g.forward(Tensor<ember::Cuda, 4>::from_data(x)).to_data(), want,
                             {1e-5, 1e-5});
    // bf16 data in and out
    const auto xb = Tensor<ember::Cpu, 4>::from_data(x).cast(DType::BF16).cast(DType::F32);
    const auto want_b = model.forward(xb).to_data();
    auto yb = g.forward(Tensor<ember::Cuda, 4>::from_data(xb.to_data()).cast(DType::BF16));
    CHECK(yb.dtype() == DType::BF16);
    ember::test::check_close(yb.cast(DType::F32).to_data(), want_b, {1e-2, 1e-2});
}

TEST_CASE("cuda batch norm: operands are checked", "[cuda][batchnorm]") {
    REQUIRE_GPU();
    using C = ember::Cuda;
    auto x = Tensor<C, 4>::zeros({2, 3, 2, 2}).into_primitive();
    auto v3 = Tensor<C, 1>::ones({3}).into_primitive();
    auto v4 = Tensor<C, 1>::ones({4}).into_primitive();
    CHECK_THROWS_AS(C::float_batch_norm(x, v4, v3, v3, v3, {1e-5, 0.1}), ember::ShapeError);
    CHECK_THROWS_WITH(C::float_batch_norm(x, v4, v3, v3, v3, {1e-5, 0.1}),
                      Catch::Contains("batch_norm") && Catch::Contains("[4]"));
    auto one = Tensor<C, 2>::zeros({1, 3}).into_primitive();
    CHECK_THROWS_AS(C::float_batch_norm(one, v3, v3, v3, v3, {1e-5, 0.1}), ember::ArgumentError);
}

TEST_CASE("cuda multi-tensor Adam and SGD equal the per-parameter steps", "[cuda][optim]") {
    REQUIRE_GPU();
    SECTION("Cuda") {
        check_multi_tensor<ember::Autodiff<ember::Cuda>>(ember::CudaDevice{0});
    }
    SECTION("Fusion<Cuda>") {
        check_multi_tensor<ember::Autodiff<ember::Fusion<ember::Cuda>>>(ember::CudaDevice{0});
    }
    SECTION("Dispatch on cuda:0+fusion+autodiff") {
        check_multi_tensor<ember::Dispatch>(ember::DispatchDevice::parse("cuda:0+fusion+autodiff"));
    }
    SECTION("one launch for many tensors, bf16 parameters updated in f32") {
        using C = ember::Cuda;
        std::vector<std::array<C::FT, 4>> ts;
        std::vector<ember::AdamStepsScalars> sc;
        std::vector<std::array<C::FT, 3>> want;
        ember::Cpu::seed(8);
        for (int i = 0; i < 40; ++i) {  // more than one launch's table (28)
            const std::size_t n = 1 + 97 * static_cast<std::size_t>(i);
            auto r = [&] {
                return Tensor<C, 1>::from_data(
                           Tensor<ember::Cpu, 1>::random({n}, ember::Distribution::Normal(0, 1))
                               .to_data())
                    .into_primitive();
            };
            auto p = r(), g = r(), m = r(), v = C::float_unary(ember::UnaryOp::Abs, r());
            if (i % 5 == 0)
                for (auto* t : {&p, &g, &m, &v}) *t = C::float_cast(*t, DType::BF16);
            // AdamW's decay on the f32 tensors (a bf16 parameter's decay would round to bf16
            // on the per-tensor path, before the update).
            const ember::AdamStepsScalars s{
                {0.9, 0.999, 1e-8, 1e-3, 1 - std::pow(0.9, i + 1), 1 - std::pow(0.999, i + 1)},
                0.0,
                i % 5 == 0 ? 0.0 : 0.01};
            auto pd = s.decoupled_decay == 0
                          ? p
                          : C::float_binary_scalar(ember::BinaryOp::Mul, p,
                                                   ember::Scalar(1 - 1e-3 * s.decoupled_decay));
            want.push_back(C::float_adam_step(pd, g, m, v, s.step));
            ts.push_back({p, g, m, v});
            sc.push_back(s);
        }
        auto got = C::float_adam_steps(ts, sc);
        REQUIRE(got.size() == want.size());
        for (std::size_t i = 0; i < got.size(); ++i)
            for (std::size_t j = 0; j < 3; ++j) {
                INFO("tensor " << i << " output " << j);
                CHECK(C::float_dtype(got[i][j]) == C::float_dtype(want[i][j]));
                ember::test::check_close(C::float_into_data(C::float_cast(got[i][j], DType::F32)),
                                         C::float_into_data(C::float_cast(want[i][j], DType::F32)),
                                         {1e-7, 1e-6});
            }
    }
    SECTION("SGD: one launch for many tensors, bit for bit the per-tensor step's values") {
        using C = ember::Cuda;
        std::vector<std::array<C::FT, 3>> ts;
        std::vector<ember::SgdStepScalars> sc;
        std::vector<std::pair<C::FT, C::FT>> want;
        ember::Cpu::seed(9);
        for (int i = 0; i < 90; ++i) {  // more than two launches' tables (40 each)
            const std::size_t n = 1 + 61 * static_cast<std::size_t>(i);
            auto r = [&] {
                return Tensor<C, 1>::from_data(
                           Tensor<ember::Cpu, 1>::random({n}, ember::Distribution::Normal(0, 1))
                               .to_data())
                    .into_primitive();
            };
            auto p = r(), g = r(), v = r();
            if (i % 7 == 0)
                for (auto* t : {&p, &g, &v}) *t = C::float_cast(*t, DType::BF16);
            // Two groups of shared scalars (a launch each), each tensor with its own rate.
            const ember::SgdStepScalars s{1e-2 * (1 + i % 3), 0.9, i % 2 == 0 ? 0.0 : 0.1,
                                          i % 2 == 0 ? 5e-4 : 0.0, i % 2 == 0};
            want.push_back(C::float_sgd_step(p, g, v, s));
            ts.push_back({p, g, v});
            sc.push_back(s);
        }
        auto got = C::float_sgd_steps(ts, sc);
        REQUIRE(got.size() == want.size());
        for (std::size_t i = 0; i < got.size(); ++i) {
            INFO("tensor " << i);
            const auto& [wp, wv] = want[i];
            CHECK(C::float_dtype(got[i][0]) == C::float_dtype(wp));
            CHECK(C::float_dtype(got[i][1]) == C::float_dtype(wv));
            CHECK(C::float_into_data(C::float_cast(got[i][0], DType::F32)).to_vec<float>() ==
                  C::float_into_data(C::float_cast(wp, DType::F32)).to_vec<float>());
            CHECK(C::float_into_data(C::float_cast(got[i][1], DType::F32)).to_vec<float>() ==
                  C::float_into_data(C::float_cast(wv, DType::F32)).to_vec<float>());
        }
        SECTION("mismatched shapes name the tensor") {
            auto bad = ts;
            bad[3][1] = ts[4][1];
            CHECK_THROWS_WITH(C::float_sgd_steps(bad, sc),
                              Catch::Contains("sgd_steps: tensor 3") && Catch::Contains("grad"));
        }
    }
}

#endif  // EMBER_CUDA

}  // namespace test_cuda_batch_norm
