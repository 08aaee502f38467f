// Convolutions on the Cuda backend through cuDNN (backends/cuda/cudnn.cpp) and through the im2col
// fallback: forward, input gradient (cuDNN's backward-data, also the transposed convolution's
// forward) and weight gradient (backward-filter), against the PyTorch fixtures of
// tests/fixtures/nn_conv.json and against the CPU backend for strides, padding, dilation, groups
// and odd sizes in 1, 2 and 3 dims; f64, f16 and bf16 operands; both paths give the same values;
// convolutions inside a captured CUDA graph (no cudnnFind there); 2-d convolutions of
// channels-last data (cuDNN's NHWC kernels) against the same fixtures, their results
// channels-last too; the graph API's engines (forced), the direct weight gradient for few values
// per output channel (cuDNN off), strided 1×1 channels-last convolutions as one GEMM, and global
// average pooling in the data's layout and dtype, each against the CPU backend. The GPU cases
// are skipped without a device; the first case runs everywhere.
#if defined(EMBER_CUDA)
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include <ember/backend/cuda.hpp>
#include <ember/backend/cudnn.hpp>
#include <ember/nn/norm.hpp>
#include <ember/stacks.hpp>
#include <ember/stacks/cuda_graph.hpp>

#include "cuda_harness.hpp"
#include "harness.hpp"

namespace test_cudnn {

namespace {
using ember::Cpu;
using ember::Cuda;
using ember::DType;
using ember::Shape;
using ember::Tensor;
using ember::TensorData;
using ember::test::channels_last;
using ember::test::check_close;
using ember::test::stored_channels_last;
using AD = ember::Autodiff<Cuda>;

/// Sets ember::cuda::set_use_cudnn for a scope and restores the previous setting after.
struct UseCudnn {
    bool previous;
    explicit UseCudnn(bool use) : previous(ember::cuda::use_cudnn()) {
        ember::cuda::set_use_cudnn(use);
    }
    ~UseCudnn() { ember::cuda::set_use_cudnn(previous); }
    UseCudnn(const UseCudnn&) = delete;
    UseCudnn& operator=(const UseCudnn&) = delete;
};

/// Whether this run should see cuDNN take the convolutions (the library is there and on).
bool expect_cudnn(bool use) {
    return use && ember::cuda::cudnn_available();
}

/// Deterministic values in [-2, 2), multiples of 1/32: exact in f32, f16 and bf16 (7 bits and a
/// sign), so every dtype convolves the same numbers.
TensorData values(const Shape& s, std::uint64_t seed) {
    std::vector<float> v(s.num_elements());
    std::uint64_t z = seed * 0x9E3779B97F4A7C15ull + 1;
    for (float& x : v) {
        z = z * 6364136223846793005ull + 1442695040888963407ull;
        x = static_cast<float>(static_cast<int>((z >> 33) % 128) - 64) / 32.0f;
    }
    return TensorData(v, s);
}

// ---- the PyTorch fixtures, through Autodiff<Cuda> with cuDNN on and off ----------------------

template <std::size_t N>
Tensor<AD, N + 2> conv_op(const Tensor<AD, N + 2>& x, const Tensor<AD, N + 2>& w,
                          const std::optional<Tensor<AD, 1>>& b, const ember::ConvOptions<N>& o) {
    if constexpr (N == 1) return ember::module::conv1d(x, w, b, o);
    if constexpr (N == 2) return ember::module::conv2d(x, w, b, o);
    if constexpr (N == 3) return ember::module::conv3d(x, w, b, o);
}
template <std::size_t N>
Tensor<AD, N + 2> conv_op(const Tensor<AD, N + 2>& x, const Tensor<AD, N + 2>& w,
                          const std::optional<Tensor<AD, 1>>& b,
                          const ember::ConvTransposeOptions<N>& o) {
    if constexpr (N == 1) return ember::module::conv_transpose1d(x, w, b, o);
    if constexpr (N == 2) return ember::module::conv_transpose2d(x, w, b, o);
    if constexpr (N == 3) return ember::module::conv_transpose3d(x, w, b, o);
}

/// f32 against float64 PyTorch: a few ulps of the O(1) values, whichever algorithm cuDNN picks.
constexpr ember::Tolerance kFixtureTol{1e-4, 1e-4};

/// Case `name` of nn_conv.json (a torch.nn layer in float64 on exact f32 values): the output,
/// and the gradients of the input, weight and bias for L = sum(output * gout), computed on
/// Autodiff<Cuda> with cuDNN switched on and off, and for 2-d cases with the input stored
/// channels-last as well (the output is then channels-last too). With cuDNN on and present, it
/// runs at least `min_cudnn` of the three convolutions (forward, input gradient, weight
/// gradient); with it off, none.
template <std::size_t N, typename Opt>
void check_fixture(const std::string& name, const Opt& o, int min_cudnn) {
    INFO("case " << name);
    ember::test::Fixture f("nn_conv", name);
    for (int run = 0; run < (N == 2 ? 4 : 2); ++run) {
        const bool use = run % 2 == 0, cl = run >= 2;
        INFO("cuDNN " << (use ? "on" : "off (im2col)") << (cl ? ", channels-last input" : ""));
        UseCudnn setting(use);
        const std::uint64_t before = ember::cuda::cudnn_convolutions();
        auto x0 = f.named_tensor<AD, N + 2>("input");
        if constexpr (N == 2)
            if (cl) x0 = channels_last(x0);
        auto x = x0.require_grad();
        auto w = f.named_tensor<AD, N + 2>("weight").require_grad();
        std::optional<Tensor<AD, 1>> b;
        if (f.has("bias")) b = f.named_tensor<AD, 1>("bias").require_grad();
        auto y = conv_op<N>(x, w, b, o);
        if constexpr (N == 2)
            if (cl) CHECK(stored_channels_last(y));
        check_close(y.to_data(), f.named("output"), kFixtureTol);
        auto grads = (y * f.named_tensor<AD, N + 2>("gout")).sum().backward();
        auto gx = x.grad(grads), gw = w.grad(grads);
        REQUIRE(gx.has_value());
        REQUIRE(gw.has_value());
        check_close(gx->to_data(), f.named("grad.input"), kFixtureTol);
        check_close(gw->to_data(), f.named("grad.weight"), kFixtureTol);
        if (b) {
            auto gb = b->grad(grads);
            REQUIRE(gb.has_value());
            check_close(gb->to_data(), f.named("grad.bias"), kFixtureTol);
        }
        const std::uint64_t ran = ember::cuda::cudnn_convolutions() - before;
        INFO("cuDNN ran " << ran << " of the 3 convolutions");
        if (!expect_cudnn(use))
            CHECK(ran == 0);
        else if (min_cudnn > 0)
            CHECK(ran >= static_cast<std::uint64_t>(min_cudnn));
    }
}

// ---- random cases against the CPU backend ------------------------------------------------------

/// One convolution configuration: x [N, C, L...], w [O, C / groups, K...].
template <std::size_t N>
struct ConvCase {
    const char* name;
    Shape x, w;
    ember::ConvOptions<N> o;
};

template <std::size_t N, typename B>
Tensor<B, N + 2> fwd(const Tensor<B, N + 2>& x, const Tensor<B, N + 2>& w,
                     const ember::ConvOptions<N>& o) {
    if constexpr (N == 1) return ember::module::conv1d(x, w, std::nullopt, o);
    if constexpr (N == 2) return ember::module::conv2d(x, w, std::nullopt, o);
    if constexpr (N == 3) return ember::module::conv3d(x, w, std::nullopt, o);
}
template <std::size_t N, typename B>
Tensor<B, N + 2> transposed(const Tensor<B, N + 2>& g, const Tensor<B, N + 2>& w,
                            const ember::ConvTransposeOptions<N>& t) {
    if constexpr (N == 1) return ember::module::conv_transpose1d(g, w, std::nullopt, t);
    if constexpr (N == 2) return ember::module::conv_transpose2d(g, w, std::nullopt, t);
    if constexpr (N == 3) return ember::module::conv_transpose3d(g, w, std::nullopt, t);
}
template <std::size_t N, typename B>
Tensor<B, N + 2> weight_grad(const Tensor<B, N + 2>& x, const Tensor<B, N + 2>& g, const Shape& ws,
                             const ember::ConvOptions<N>& o) {
    if constexpr (N == 1)
        return Tensor<B, 3>(B::conv1d_weight_backward(x.primitive(), g.primitive(), ws, o));
    if constexpr (N == 2)
        return Tensor<B, 4>(B::conv2d_weight_backward(x.primitive(), g.primitive(), ws, o));
    if constexpr (N == 3)
        return Tensor<B, 5>(B::conv3d_weight_backward(x.primitive(), g.primitive(), ws, o));
}

/// The transposed convolution that maps conv(x)'s gradient back onto x's shape (what
/// Autodiff's backward of a convolution runs): output padding restores the rows a stride drops.
template <std::size_t N>
ember::ConvTransposeOptions<N> input_grad_options(const Shape& xs, const Shape& ws, const Shape& ys,
                                                  const ember::ConvOptions<N>& o) {
    ember::ConvTransposeOptions<N> t;
    t.stride = o.stride;
    t.padding = o.padding;
    t.dilation = o.dilation;
    t.groups = o.groups;
    for (std::size_t i = 0; i < N; ++i) {
        const std::size_t full =
            (ys[i + 2] - 1) * o.stride[i] + o.dilation[i] * (ws[i + 2] - 1) + 1;
        t.padding_out[i] = xs[i + 2] + 2 * o.padding[i] - full;
    }
    return t;
}

/// The three convolutions of `c` in `dtype` on Cuda, against the CPU backend in f32 (f64 for an
/// f64 run) on the same values. Returns how many of them cuDNN ran.
template <std::size_t N>
std::uint64_t check_against_cpu(const ConvCase<N>& c, DType dtype, ember::Tolerance tol,
                                bool channels_last = false) {
    constexpr std::size_t D = N + 2;
    const DType ref = dtype == DType::F64 ? DType::F64 : DType::F32;
    // Data enters a backend as f32 (as in Burn); cast() makes the other float dtypes.
    const TensorData xd = values(c.x, 11), wd = values(c.w, 12);
    auto xc = Tensor<Cpu, D>::from_data(xd).cast(ref);
    auto wc = Tensor<Cpu, D>::from_data(wd).cast(ref);
    auto yc = fwd<N>(xc, wc, c.o);
    const TensorData gd = values(yc.shape(), 13);
    auto gc = Tensor<Cpu, D>::from_data(gd).cast(ref);
    const auto t = input_grad_options<N>(c.x, c.w, yc.shape(), c.o);
    auto dxc = transposed<N>(gc, wc, t);
    auto dwc = weight_grad<N>(xc, gc, c.w, c.o);
    REQUIRE(dxc.shape() == c.x);

    auto on_gpu = [&](const TensorData& d) { return Tensor<Cuda, D>::from_data(d).cast(dtype); };
    auto xg = on_gpu(xd), wg = on_gpu(wd), gg = on_gpu(gd);
    if constexpr (N == 2) {
        if (channels_last) {  // relaid (as f32 data), then cast
            xg = ember::test::channels_last(xg).cast(dtype);
            wg = ember::test::channels_last(wg).cast(dtype);
            gg = ember::test::channels_last(gg).cast(dtype);
        }
    }
    const std::uint64_t before = ember::cuda::cudnn_convolutions();
    auto yg = fwd<N>(xg, wg, c.o);
    auto dxg = transposed<N>(gg, wg, t);
    auto dwg = weight_grad<N>(xg, gg, c.w, c.o);
    const std::uint64_t ran = ember::cuda::cudnn_convolutions() - before;
    CHECK(yg.dtype() == dtype);
    CHECK(dxg.dtype() == dtype);
    CHECK(dwg.dtype() == dtype);
    {
        INFO("forward");
        check_close(yg.to_data().convert(ref), yc.to_data(), tol);
    }
    // A gradient element sums many products (C_out·taps for the input's, N·H·W for the
    // weight's), and cuDNN's algorithms (FFT, Winograd, split reductions; the autotuner's pick
    // varies with the GPU's load) order and round those sums differently: the error follows the
    // size of the terms, not of the result, so an element near 0 among elements near 100 may be
    // 1e-4 off in f32 (seen on an H200 under eight concurrent test processes), and in f16/bf16
    // the partial sums some algorithms round to the operand type are off by that type's ulp of
    // the largest. The absolute tolerance scales with the largest element.
    auto check_gradient = [&](const Tensor<Cuda, D>& got, const Tensor<Cpu, D>& ref_grad) {
        const TensorData want = ref_grad.to_data();
        double largest = 0;
        for (double v : want.convert(DType::F64).to_vec<double>())
            largest = std::max(largest, std::abs(v));
        const bool narrow = dtype == DType::F16 || dtype == DType::BF16;
        ember::Tolerance scaled = tol;
        scaled.atol = std::max(tol.atol, (narrow ? tol.rtol / 2 : 1e-5) * largest);
        check_close(got.to_data().convert(ref), want, scaled);
    };
    {
        INFO("input gradient (backward-data)");
        check_gradient(dxg, dxc);
    }
    {
        INFO("weight gradient (backward-filter)");
        check_gradient(dwg, dwc);
    }
    return ran;
}

template <std::size_t N>
ember::ConvOptions<N> opts(std::array<std::size_t, N> stride, std::array<std::size_t, N> pad,
                           std::array<std::size_t, N> dil, std::size_t groups) {
    ember::ConvOptions<N> o;
    o.stride = stride;
    o.padding = pad;
    o.dilation = dil;
    o.groups = groups;
    return o;
}

/// 2-d configurations: plain, strided and padded with odd sizes, dilated and grouped,
/// depthwise, pointwise, a ResNet-like 3×3 layer, and a stride larger than the kernel.
std::vector<ConvCase<2>> cases_2d() {
    return {
        {"3x3, no padding", {2, 3, 7, 6}, {4, 3, 3, 3}, opts<2>({1, 1}, {0, 0}, {1, 1}, 1)},
        {"odd sizes, stride (2, 1), padding (1, 2)",
         {3, 5, 11, 9},
         {7, 5, 3, 4},
         opts<2>({2, 1}, {1, 2}, {1, 1}, 1)},
        {"dilation (2, 3), groups 2",
         {2, 6, 10, 13},
         {4, 3, 3, 2},
         opts<2>({1, 1}, {1, 0}, {2, 3}, 2)},
        {"depthwise 5x5, stride 2",
         {2, 8, 13, 13},
         {8, 1, 5, 5},
         opts<2>({2, 2}, {2, 2}, {1, 1}, 8)},
        {"pointwise 1x1", {4, 16, 7, 7}, {32, 16, 1, 1}, opts<2>({1, 1}, {0, 0}, {1, 1}, 1)},
        {"ResNet-like 3x3, 32 channels",
         {8, 32, 16, 16},
         {32, 32, 3, 3},
         opts<2>({1, 1}, {1, 1}, {1, 1}, 1)},
        {"stride 3 over a 2x2 kernel",
         {1, 2, 10, 8},
         {3, 2, 2, 2},
         opts<2>({3, 3}, {0, 1}, {1, 1}, 1)},
    };
}

}  // namespace

TEST_CASE("cudnn: the library loads at run time or says why", "[cuda][cudnn]") {
    // Needs no GPU: dlopen of libcudnn.so.9 and its version.
    if (ember::cuda::cudnn_available()) {
        CHECK(ember::cuda::cudnn_unavailable_reason().empty());
        CHECK(ember::cuda::cudnn_version() / 10000 == 9);
    } else {
        const std::string why = ember::cuda::cudnn_unavailable_reason();
        INFO("reason: " << why);
        CHECK(why.find("cudnn") != std::string::npos);
        CHECK(ember::cuda::cudnn_version() == 0);
    }
    {
        UseCudnn off(false);
        CHECK_FALSE(ember::cuda::use_cudnn());
        UseCudnn on(true);
        CHECK(ember::cuda::use_cudnn());
    }
}

TEST_CASE("cudnn: convolutions and their gradients match torch.nn", "[cuda][cudnn]") {
    REQUIRE_GPU();
    SECTION("conv2d") {
        check_fixture<2>("conv2d_basic", ember::ConvOptions<2>{}, 3);
        check_fixture<2>("conv2d_stride_pad", opts<2>({2, 1}, {1, 0}, {1, 1}, 1), 3);
        // padding="same" with dilation (2, 1) over a (3, 5) kernel: dilation·(k − 1)/2.
        check_fixture<2>("conv2d_same_dilation", opts<2>({1, 1}, {2, 2}, {2, 1}, 1), 1);
        check_fixture<2>("conv2d_groups_nobias", opts<2>({1, 1}, {0, 0}, {1, 2}, 2), 1);
        check_fixture<2>("conv2d_depthwise", opts<2>({1, 1}, {1, 1}, {1, 1}, 3), 1);
    }
    SECTION("conv1d and conv3d") {
        check_fixture<1>("conv1d_stride_pad_dil", opts<1>({2}, {2}, {2}, 1), 1);
        // 3-d, grouped and dilated: values checked whichever path cuDNN leaves it to.
        check_fixture<3>("conv3d_stride_pad_groups", opts<3>({2, 1, 2}, {1, 1, 0}, {1, 2, 1}, 2),
                         0);
    }
    SECTION("transposed convolutions") {
        ember::ConvTransposeOptions<2> a;
        a.stride = {2, 3};
        a.padding = {1, 0};
        a.padding_out = {1, 2};
        check_fixture<2>("conv_transpose2d_stride_pad_opad", a, 3);
        ember::ConvTransposeOptions<2> b;
        b.stride = {1, 2};
        b.groups = 2;
        b.dilation = {2, 1};
        check_fixture<2>("conv_transpose2d_groups_dil_nobias", b, 1);
        ember::ConvTransposeOptions<1> c;
        c.stride = {3};
        c.padding_out = {2};
        c.groups = 2;
        c.dilation = {2};
        check_fixture<1>("conv_transpose1d_groups_dil_nobias", c, 1);
    }
}

TEST_CASE("cudnn: strides, padding, dilation, groups and odd sizes match the CPU backend",
          "[cuda][cudnn]") {
    REQUIRE_GPU();
    for (bool use : {true, false}) {
        UseCudnn setting(use);
        for (const auto& c : cases_2d()) {
            INFO("conv2d " << c.name << ", cuDNN " << (use ? "on" : "off"));
            const std::uint64_t ran = check_against_cpu<2>(c, DType::F32, {1e-4, 1e-4});
            INFO("cuDNN ran " << ran << " of 3");
            if (expect_cudnn(use))
                CHECK(ran >= 1);
            else
                CHECK(ran == 0);
        }
        {
            INFO("conv1d, cuDNN " << (use ? "on" : "off"));
            ConvCase<1> c{"conv1d", {3, 4, 29}, {6, 2, 5}, opts<1>({2}, {3}, {2}, 2)};
            check_against_cpu<1>(c, DType::F32, {1e-4, 1e-4});
        }
        {
            INFO("conv3d, cuDNN " << (use ? "on" : "off"));
            ConvCase<3> c{"conv3d",
                          {2, 4, 5, 7, 6},
                          {6, 2, 3, 3, 2},
                          opts<3>({1, 2, 1}, {1, 1, 0}, {1, 1, 2}, 2)};
            check_against_cpu<3>(c, DType::F32, {1e-4, 1e-4});
        }
    }
}

TEST_CASE("cudnn: a plain 3x3 convolution runs all three passes on cuDNN", "[cuda][cudnn]") {
    REQUIRE_GPU();
    UseCudnn on(true);
    // A first convolution makes the device's cuDNN handle (which may fail: then it says why).
    const ConvCase<2> first{"1x1", {1, 2, 3, 3}, {2, 2, 1, 1}, opts<2>({1, 1}, {0, 0}, {1, 1}, 1)};
    check_against_cpu<2>(first, DType::F32, {1e-4, 1e-4});
    if (!ember::cuda::cudnn_available()) {
        WARN("skipped: " << ember::cuda::cudnn_unavailable_reason());
        return;
    }
    const ConvCase<2> c{
        "3x3 stride 1 pad 1", {4, 8, 12, 12}, {16, 8, 3, 3}, opts<2>({1, 1}, {1, 1}, {1, 1}, 1)};
    // Twice: the first run measures the algorithms (cudnnFind), the second reuses them.
    CHECK(check_against_cpu<2>(c, DType::F32, {1e-4, 1e-4}) == 3);
    CHECK(check_against_cpu<2>(c, DType::F32, {1e-4, 1e-4}) == 3);
}

TEST_CASE("cudnn: f64, f16 and bf16 convolutions", "[cuda][cudnn]") {
    REQUIRE_GPU();
    UseCudnn on(true);
    const ConvCase<2> c{"odd sizes, stride 2, groups 2",
                        {2, 4, 9, 11},
                        {6, 2, 3, 3},
                        opts<2>({2, 2}, {1, 1}, {1, 1}, 2)};
    const ConvCase<2> plain{
        "3x3", {2, 8, 10, 10}, {8, 8, 3, 3}, opts<2>({1, 1}, {1, 1}, {1, 1}, 1)};
    {
        INFO("f64");
        check_against_cpu<2>(c, DType::F64, {1e-10, 1e-10});
    }
    // One rounding of an f32-accumulated result is half an ulp of the output's type (2^-11 for
    // f16, 2^-8 for bf16, relative); the headroom covers algorithms whose transforms (Winograd,
    // FFT) round intermediates to the operand type, with errors relative to the inputs' scale.
    for (const auto& cc : {c, plain}) {
        INFO(cc.name);
        {
            INFO("f16");
            check_against_cpu<2>(cc, DType::F16, {1e-2, 5e-3});
        }
        {
            INFO("bf16");
            check_against_cpu<2>(cc, DType::BF16, {5e-2, 1.6e-2});
        }
    }
    // Channels-last 16-bit data whose channels are not a multiple of 8 (a ResNet stem's 3),
    // which cuDNN's NHWC tensor-core kernels do not take: its other kernels run them.
    const ConvCase<2> stem{"3 input channels, channels-last",
                           {4, 3, 12, 10},
                           {16, 3, 3, 3},
                           opts<2>({1, 1}, {1, 1}, {1, 1}, 1)};
    const ConvCase<2> strided{"5 input channels, stride 2, channels-last",
                              {2, 5, 9, 11},
                              {8, 5, 3, 3},
                              opts<2>({2, 2}, {1, 1}, {1, 1}, 1)};
    for (const auto& cc : {stem, strided}) {
        INFO(cc.name);
        {
            INFO("f16");
            check_against_cpu<2>(cc, DType::F16, {1e-2, 5e-3}, true);
        }
        {
            INFO("bf16");
            check_against_cpu<2>(cc, DType::BF16, {5e-2, 1.6e-2}, true);
        }
    }
}

TEST_CASE("conv weight gradient: the direct kernels for few inputs per output channel",
          "[cuda][cudnn]") {
    // cin/groups · taps ≤ 32 and ≥ 32 output channels a group run on conv_wgrad.cu's kernels
    // where cuDNN does not take the weight gradient (switched off here): positions split over
    // the whole GPU, f32 sums. With cuDNN on, the same cases check cuDNN's.
    REQUIRE_GPU();
    const std::vector<ConvCase<2>> cases = {
        {"CIFAR stem 3→64, 3x3", {8, 3, 32, 32}, {64, 3, 3, 3}, opts<2>({1, 1}, {1, 1}, {1, 1}, 1)},
        {"40 outputs (a part tile), stride 2, padding (1, 2), dilation (2, 1), odd sizes",
         {3, 3, 17, 15},
         {40, 3, 3, 3},
         opts<2>({2, 2}, {1, 2}, {2, 1}, 1)},
        {"96 outputs (two tiles), 32 values a position, stride (2, 1)",
         {2, 2, 13, 11},
         {96, 2, 4, 4},
         opts<2>({2, 1}, {0, 1}, {1, 1}, 1)},
        {"groups 2 of 32 outputs", {2, 4, 9, 9}, {64, 2, 3, 3}, opts<2>({1, 1}, {1, 1}, {1, 1}, 2)},
        {"pointwise 16→32", {3, 16, 7, 5}, {32, 16, 1, 1}, opts<2>({1, 1}, {0, 0}, {1, 1}, 1)},
    };
    for (bool use : {false, true}) {
        UseCudnn setting(use);
        for (const auto& c : cases) {
            INFO(c.name << ", cuDNN " << (use ? "on" : "off"));
            for (bool cl : {false, true}) {
                INFO((cl ? "channels-last" : "NCHW"));
                const std::uint64_t ran = check_against_cpu<2>(c, DType::F32, {1e-4, 1e-4}, cl);
                if (!use) CHECK(ran == 0);
                check_against_cpu<2>(c, DType::F16, {1e-2, 5e-3}, cl);
                check_against_cpu<2>(c, DType::BF16, {5e-2, 1.6e-2}, cl);
            }
        }
        {
            INFO("conv1d, 4·7 values a position");
            ConvCase<1> c{"conv1d", {3, 4, 50}, {32, 4, 7}, opts<1>({2}, {3}, {1}, 1)};
            check_against_cpu<1>(c, DType::F32, {1e-4, 1e-4});
            check_against_cpu<1>(c, DType::BF16, {5e-2, 1.6e-2});
        }
        {
            INFO("conv3d, 2·2·2·2 values a position");
            ConvCase<3> c{"conv3d",
                          {2, 2, 5, 6, 7},
                          {32, 2, 2, 2, 2},
                          opts<3>({1, 2, 1}, {1, 0, 1}, {1, 1, 2}, 1)};
            check_against_cpu<3>(c, DType::F32, {1e-4, 1e-4});
            check_against_cpu<3>(c, DType::F16, {1e-2, 5e-3});
        }
    }
}

TEST_CASE("conv2d: the few-channel f32 kernels at large batches", "[cuda][cudnn]") {
    // Above 2^17 output positions, f32 NCHW convolutions of one group with at most 32 values an
    // output (forward) or 3x3 kernels with cout·cin ≤ 256 (weight gradient) run on
    // conv_small.cu's kernels, cuDNN or not; only the input gradient is cuDNN's then.
    REQUIRE_GPU();
    const std::vector<ConvCase<2>> cases = {
        {"the guide CNN's 1→8 layer", {200, 1, 28, 28}, {8, 1, 3, 3}, ember::ConvOptions<2>{}},
        {"the guide CNN's 8→16 layer (weight gradient only)",
         {256, 8, 26, 26},
         {16, 8, 3, 3},
         ember::ConvOptions<2>{}},
        {"3→6 (tiles of 2 channels), stride 2, padding 1, odd sizes",
         {600, 3, 31, 29},
         {6, 3, 3, 3},
         opts<2>({2, 2}, {1, 1}, {1, 1}, 1)},
        {"2→3 (tiles of 1 channel), dilation 2, padding (1, 2)",
         {300, 2, 27, 25},
         {3, 2, 3, 3},
         opts<2>({1, 1}, {1, 2}, {2, 2}, 1)},
        {"4→12 (tiles of 4 channels), stride (1, 2), padding (0, 1)",
         {300, 4, 22, 47},
         {12, 4, 3, 3},
         opts<2>({1, 2}, {0, 1}, {1, 1}, 1)},
    };
    for (bool use : {true, false}) {
        UseCudnn setting(use);
        for (const auto& c : cases) {
            INFO(c.name << ", cuDNN " << (use ? "on" : "off"));
            const std::uint64_t ran = check_against_cpu<2>(c, DType::F32, {1e-4, 1e-4});
            // The input gradient, and the forward where an output needs more than 32 values.
            const bool small_fwd = c.w[1] * c.w[2] * c.w[3] <= 32;
            if (expect_cudnn(use))
                CHECK(ran == (small_fwd ? 1u : 2u));
            else
                CHECK(ran == 0);
        }
    }
}

TEST_CASE("cudnn: the graph API's engines give the legacy algorithms' values", "[cuda][cudnn]") {
    // EMBER_CUDNN_ENGINES=all keeps the fastest engine of cuDNN's graph API for each new
    // configuration even where the legacy algorithm was faster, so every direction of these
    // f32/f16/bf16 convolutions (shapes no other test uses: configurations are tuned once) runs on
    // an engine where one builds.
    REQUIRE_GPU();
    UseCudnn on(true);
    ::setenv("EMBER_CUDNN_ENGINES", "all", 1);
    const std::vector<ConvCase<2>> cases = {
        {"3x3, 24→40, odd sizes",
         {3, 24, 13, 11},
         {40, 24, 3, 3},
         opts<2>({1, 1}, {1, 1}, {1, 1}, 1)},
        {"3x3 stride 2, 16→48",
         {2, 16, 14, 10},
         {48, 16, 3, 3},
         opts<2>({2, 2}, {1, 1}, {1, 1}, 1)},
    };
    for (const auto& c : cases) {
        INFO(c.name);
        for (bool cl : {false, true}) {
            INFO((cl ? "channels-last" : "NCHW"));
            check_against_cpu<2>(c, DType::F32, {1e-4, 1e-4}, cl);  // no TF32: FMA engines
            check_against_cpu<2>(c, DType::F16, {1e-2, 5e-3}, cl);
            check_against_cpu<2>(c, DType::BF16, {5e-2, 1.6e-2}, cl);
        }
    }
    ::unsetenv("EMBER_CUDNN_ENGINES");
}

TEST_CASE("conv2d: strided 1x1 convolutions over channels-last data run as one GEMM",
          "[cuda][cudnn]") {
    // A ResNet's downsampling shortcut: the strided positions copied out densely, times the
    // weight, whether cuDNN is on or not (its gradients stay cuDNN's).
    REQUIRE_GPU();
    const std::vector<ConvCase<2>> cases = {
        {"1x1 stride 2, 64→128",
         {4, 64, 16, 16},
         {128, 64, 1, 1},
         opts<2>({2, 2}, {0, 0}, {1, 1}, 1)},
        {"1x1 stride (3, 2), odd sizes, 5→7",
         {3, 5, 11, 8},
         {7, 5, 1, 1},
         opts<2>({3, 2}, {0, 0}, {1, 1}, 1)},
    };
    for (bool use : {true, false}) {
        UseCudnn setting(use);
        for (const auto& c : cases) {
            INFO(c.name << ", cuDNN " << (use ? "on" : "off"));
            check_against_cpu<2>(c, DType::F32, {1e-4, 1e-4}, true);
            check_against_cpu<2>(c, DType::F16, {1e-2, 5e-3}, true);
            check_against_cpu<2>(c, DType::BF16, {5e-2, 1.6e-2}, true);
        }
    }
    SECTION("with a bias, the output channels-last") {
        const TensorData xd = values({2, 6, 9, 7}, 21), wd = values({10, 6, 1, 1}, 22),
                         bd = values({10}, 23);
        ember::ConvOptions<2> o;
        o.stride = {2, 2};
        auto yc =
            ember::module::conv2d(Tensor<Cpu, 4>::from_data(xd), Tensor<Cpu, 4>::from_data(wd),
                                  Tensor<Cpu, 1>::from_data(bd), o);
        for (DType dt : {DType::F32, DType::BF16}) {
            INFO(ember::dtype_name(dt));
            auto xg = channels_last(Tensor<Cuda, 4>::from_data(xd)).cast(dt);
            auto yg = ember::module::conv2d(xg, Tensor<Cuda, 4>::from_data(wd).cast(dt),
                                            Tensor<Cuda, 1>::from_data(bd).cast(dt), o);
            CHECK(stored_channels_last(yg));
            const ember::Tolerance tol =
                dt == DType::F32 ? ember::Tolerance{1e-5, 1e-5} : ember::Tolerance{5e-2, 1.6e-2};
            check_close(yg.to_data().convert(DType::F32), yc.to_data(), tol);
        }
    }
}

TEST_CASE("adaptive_avg_pool2d to 1x1: global pooling in the data's own layout and dtype",
          "[cuda][cudnn]") {
    // A ResNet's head on channels-last bf16 data: forward and backward read and write that
    // layout and dtype directly, against the CPU backend's adaptive pooling.
    REQUIRE_GPU();
    const TensorData xd = values({3, 40, 5, 7}, 31), gd = values({3, 40, 1, 1}, 32);
    auto xc = Tensor<Cpu, 4>::from_data(xd);
    const TensorData want_y = ember::module::adaptive_avg_pool2d(xc, {1, 1}).to_data();
    const TensorData want_dx =
        Tensor<Cpu, 4>(Cpu::adaptive_avg_pool2d_backward(xc.primitive(),
                                                         Tensor<Cpu, 4>::from_data(gd).primitive()))
            .to_data();
    for (bool cl : {false, true}) {
        for (DType dt : {DType::F32, DType::F64, DType::F16, DType::BF16}) {
            INFO((cl ? "channels-last " : "contiguous ") << ember::dtype_name(dt));
            auto xg = Tensor<Cuda, 4>::from_data(xd);
            if (cl) xg = channels_last(xg);
            xg = xg.cast(dt);
            auto gg = Tensor<Cuda, 4>::from_data(gd).cast(dt);
            auto y = ember::module::adaptive_avg_pool2d(xg, {1, 1});
            auto dx =
                Tensor<Cuda, 4>(Cuda::adaptive_avg_pool2d_backward(xg.primitive(), gg.primitive()));
            CHECK(y.dtype() == dt);
            CHECK(dx.dtype() == dt);
            CHECK(stored_channels_last(dx) == cl);
            const bool narrow = dt == DType::F16 || dt == DType::BF16;
            const ember::Tolerance tol =
                narrow ? ember::Tolerance{1e-2, 1e-2} : ember::Tolerance{1e-6, 1e-6};
            check_close(y.to_data().convert(DType::F32), want_y, tol);
            check_close(dx.to_data().convert(DType::F32), want_dx, tol);
        }
    }
}

namespace {
/// A ResNet basic block, relu(bn2(conv2(relu(bn1(conv1(x))))) + x), in training mode on stack B,
/// under bf16 autocast with `bf16`; returns y and the gradients of x, conv1's weight and bn1's
/// gamma for L = Σ y·g (f32 data), and checks on CUDA that y and dx are channels-last where x is.
template <typename B>
std::vector<TensorData> block_run(const TensorData& xd, const TensorData& gd, bool cl, bool bf16) {
    const std::size_t c = xd.shape()[1];
    const Shape ws{c, c, 3, 3};
    auto conv = [&](std::uint64_t seed) {
        // He-scaled weights, exact in bf16: multiples of 1/32 in [-2, 2) over √(9c).
        auto w = Tensor<B, 4>::from_data(values(ws, seed)) * (1.0 / std::sqrt(9.0 * double(c)));
        return w.require_grad();
    };
    auto w1 = conv(41), w2 = conv(42);
    auto bn1 = ember::nn::BatchNormConfig{c}.init<B>();
    auto bn2 = ember::nn::BatchNormConfig{c}.init<B>();
    auto xs = Tensor<B, 4>::from_data(xd);
    if (cl) xs = channels_last(xs);
    auto x = xs.require_grad();
    const auto o = opts<2>({1, 1}, {1, 1}, {1, 1}, 1);
    auto y = [&] {
        const ember::Autocast autocast(DType::BF16, bf16);
        auto h = ember::module::conv2d(x, w1, std::nullopt, o);
        h = ember::activation::relu(bn1.forward(h));
        h = bn2.forward(ember::module::conv2d(h, w2, std::nullopt, o));
        return ember::activation::relu(h.cast(DType::F32) + x);
    }();
    auto grads = (y * Tensor<B, 4>::from_data(gd)).sum().backward();
    auto dx = *x.grad(grads);
    if constexpr (std::is_same_v<B, AD>) {
        if (cl) {
            CHECK(stored_channels_last(y));
            CHECK(stored_channels_last(dx));
        }
    }
    return {y.to_data(), dx.to_data(), w1.grad(grads)->to_data(),
            bn1.gamma.val().grad(grads)->to_data()};
}
}  // namespace

TEST_CASE("cudnn: channels-last data stays channels-last through a residual block",
          "[cuda][cudnn]") {
    REQUIRE_GPU();
    UseCudnn on(true);
    // 8 channels (tensor cores' multiple), odd spatial size; the CPU stack is the reference.
    const Shape s{4, 8, 7, 7};
    const auto x = values(s, 51), g = values(s, 52);
    const char* what[] = {"y", "dx", "dw1", "dgamma1"};
    {
        INFO("f32");
        // TF32 may be on for convolutions (10-bit mantissas).
        const auto want = block_run<ember::Autodiff<Cpu>>(x, g, false, false);
        const auto nchw = block_run<AD>(x, g, false, false);
        const auto cl = block_run<AD>(x, g, true, false);
        for (std::size_t i = 0; i < want.size(); ++i) {
            INFO(what[i]);
            check_close(nchw[i], want[i], {1e-2, 1e-2});
            check_close(cl[i], want[i], {1e-2, 1e-2});
        }
    }
    {
        INFO("bf16 autocast");
        // The layout changes no value beyond the kernels' own rounding: channels-last against
        // the NCHW run. (The CPU computes autocast's convolutions in f32, so it is no reference
        // for the bf16 roundings, which two batch norms' backward passes magnify to 0.5 in dx
        // here; PyTorch 2.11's CUDA autocast gives the same bf16 dx, checked by hand on the
        // H200, 2026-11-29: its first elements -0.703125, 0.30859375, -0.66796875, -0.046875
        // against ember's -0.703125, 0.3046875, -0.6679688, -0.046875.)
        const auto nchw = block_run<AD>(x, g, false, true);
        const auto cl = block_run<AD>(x, g, true, true);
        for (std::size_t i = 0; i < nchw.size(); ++i) {
            INFO(what[i]);
            check_close(cl[i], nchw[i], {2e-2, 2e-2});
        }
    }
}

TEST_CASE("cudnn: the fallback switch gives the same values", "[cuda][cudnn]") {
    REQUIRE_GPU();
    const ConvCase<2> c{
        "stride 2, dilation 2", {3, 6, 15, 14}, {9, 6, 3, 3}, opts<2>({2, 2}, {2, 1}, {2, 2}, 1)};
    auto x = Tensor<Cuda, 4>::from_data(values(c.x, 21));
    auto w = Tensor<Cuda, 4>::from_data(values(c.w, 22));
    std::optional<TensorData> first;
    for (bool use : {true, false}) {
        INFO("cuDNN " << (use ? "on" : "off"));
        UseCudnn setting(use);
        CHECK(ember::cuda::use_cudnn() == use);
        const std::uint64_t before = ember::cuda::cudnn_convolutions();
        const TensorData y = fwd<2>(x, w, c.o).to_data();
        CHECK((ember::cuda::cudnn_convolutions() > before) == expect_cudnn(use));
        if (first)
            check_close(y, *first, {1e-4, 1e-4});
        else
            first = y;
    }
}

TEST_CASE("cudnn: convolutions inside a captured CUDA graph", "[cuda][cudnn][graph]") {
    REQUIRE_GPU();
    UseCudnn on(true);
    using ember::module::conv2d;
    const auto o = opts<2>({2, 2}, {1, 1}, {1, 1}, 1);
    auto x = Tensor<AD, 4>::from_data(values({2, 3, 9, 9}, 31));
    auto w = Tensor<AD, 4>::from_data(values({5, 3, 3, 3}, 32)).require_grad();
    auto g = Tensor<AD, 4>::from_data(values({2, 5, 5, 5}, 33));
    // The gradient is a tensor of the inner backend.
    auto step = [&](std::optional<Tensor<AD, 4>>& y, std::optional<Tensor<Cuda, 4>>& dw) {
        y = conv2d(x, w, std::nullopt, o);
        auto grads = (*y * g).sum().backward();
        dw = w.grad(grads);
    };
    // The expected values: the same step on the CPU.
    auto xc = Tensor<Cpu, 4>::from_data(x.to_data());
    auto wc = Tensor<Cpu, 4>::from_data(w.to_data());
    auto gc = Tensor<Cpu, 4>::from_data(g.to_data());
    const TensorData y_ref = fwd<2>(xc, wc, o).to_data();
    const TensorData dw_ref = weight_grad<2>(xc, gc, Shape{5, 3, 3, 3}, o).to_data();

    SECTION("after an eager run (the algorithms measured then are reused)") {
        std::optional<Tensor<AD, 4>> y0, y;
        std::optional<Tensor<Cuda, 4>> dw0, dw;
        step(y0, dw0);  // eager: cudnnFind runs here
        // Into other variables: a step that replaced tensors from before its capture could
        // not be replayed.
        auto captured = ember::cuda::capture([&] { step(y, dw); });
        REQUIRE(captured.replayable());
        REQUIRE(dw.has_value());
        check_close(y->to_data(), y_ref, {1e-4, 1e-4});
        check_close(dw->to_data(), dw_ref, {1e-4, 1e-4});
        captured.replay();
        check_close(y->to_data(), y_ref, {1e-4, 1e-4});
        check_close(dw->to_data(), dw_ref, {1e-4, 1e-4});
    }
    SECTION("a shape first met inside the capture (cuDNN's heuristic pick, no cudnnFind)") {
        auto x2 = Tensor<AD, 4>::from_data(values({3, 3, 7, 11}, 34));
        auto w2 = Tensor<AD, 4>::from_data(values({4, 3, 2, 3}, 35));
        std::optional<Tensor<AD, 4>> y2;
        auto captured = ember::cuda::capture([&] { y2 = conv2d(x2, w2, std::nullopt, o); });
        REQUIRE(y2.has_value());
        REQUIRE(captured.replayable());
        const TensorData ref = fwd<2>(Tensor<Cpu, 4>::from_data(x2.to_data()),
                                      Tensor<Cpu, 4>::from_data(w2.to_data()), o)
                                   .to_data();
        check_close(y2->to_data(), ref, {1e-4, 1e-4});
        captured.replay();
        check_close(y2->to_data(), ref, {1e-4, 1e-4});
        // Eager now: the configuration is measured and its result is the same.
        check_close(conv2d(x2, w2, std::nullopt, o).to_data(), ref, {1e-4, 1e-4});
    }
}

}  // namespace test_cudnn

#endif  // EMBER_CUDA
