// The Vulkan backend's two ways to convolve (backends/vulkan/conv.cpp): the direct kernels
// specialised to a geometry (shaders/conv_direct.comp), which small weights take, and im2col +
// the tiled product, which large ones take (EMBER_VULKAN_CONV=im2col forces it). Both must give
// the convolution, its input gradient (the transposed convolution) and its weight gradient
// written out as sums on the host; small integers make every sum exact in f32, so the checks
// are equalities whatever order a kernel adds in. The PyTorch fixtures of the shared suites
// (test_module_ops.cpp, test_autodiff_modules.cpp) cover the ops on every backend as well.
// Compiled only with the Vulkan backend; skipped without a device (CI runs it on lavapipe).
#if defined(EMBER_VULKAN)
#include <array>
#include <cstdlib>
#include <span>
#include <string>
#include <vector>

#include <ember/stacks.hpp>

#include "harness.hpp"

namespace test_vulkan_conv {

namespace {
using ember::Tensor;
using AD = ember::Autodiff<ember::Vulkan>;
using A3 = std::array<std::size_t, 3>;

/// A convolution in 3-d form (leading unit dims for 1- and 2-d).
struct ConvCase {
    const char* name;
    std::size_t n, c, co, groups;
    A3 in, k, stride, pad, dil;
    bool bias;
    A3 out() const {
        A3 o{};
        for (int i = 0; i < 3; ++i)
            o[i] = (in[i] + 2 * pad[i] - dil[i] * (k[i] - 1) - 1) / stride[i] + 1;
        return o;
    }
};

/// Small integers: products and sums of a few hundred of them are exact in f32.
std::vector<float> ints(std::size_t count, int mod, int shift) {
    std::vector<float> v(count);
    for (std::size_t i = 0; i < count; ++i) v[i] = float(int(i % mod) - shift);
    return v;
}

/// y = conv(x, w) + b, dx and dw of sum(y * r), summed on the host in the definition's terms.
struct Reference {
    std::vector<float> y, dx, dw;
};
Reference reference(const ConvCase& t, const std::vector<float>& x, const std::vector<float>& w,
                    const std::vector<float>& b, const std::vector<float>& r) {
    const A3 out = t.out();
    const std::size_t cg = t.c / t.groups, cog = t.co / t.groups;
    const std::size_t ip = t.in[0] * t.in[1] * t.in[2], op = out[0] * out[1] * out[2];
    const std::size_t kt = t.k[0] * t.k[1] * t.k[2];
    Reference ref{std::vector<float>(t.n * t.co * op), std::vector<float>(x.size()),
                  std::vector<float>(w.size())};
    for (std::size_t n = 0; n < t.n; ++n)
        for (std::size_t co = 0; co < t.co; ++co)
            for (std::size_t o = 0; o < op; ++o) {
                const std::size_t od = o / (out[1] * out[2]), oh = o / out[2] % out[1],
                                  ow = o % out[2];
                const std::size_t yi = (n * t.co + co) * op + o;
                double acc = t.bias ? b[co] : 0.0;
                for (std::size_t ci = 0; ci < cg; ++ci)
                    for (std::size_t kk = 0; kk < kt; ++kk) {
                        const std::size_t kd = kk / (t.k[1] * t.k[2]), kh = kk / t.k[2] % t.k[1],
                                          kw = kk % t.k[2];
                        const long id = long(od * t.stride[0] + kd * t.dil[0]) - long(t.pad[0]);
                        const long ih = long(oh * t.stride[1] + kh * t.dil[1]) - long(t.pad[1]);
                        const long iw = long(ow * t.stride[2] + kw * t.dil[2]) - long(t.pad[2]);
                        if (id < 0 || ih < 0 || iw < 0 || id >= long(t.in[0]) ||
                            ih >= long(t.in[1]) || iw >= long(t.in[2]))
                            continue;
                        const std::size_t xc = co / cog * cg + ci;
                        const std::size_t xi =
                            (n * t.c + xc) * ip +
                            (std::size_t(id) * t.in[1] + std::size_t(ih)) * t.in[2] +
                            std::size_t(iw);
                        const std::size_t wi = (co * cg + ci) * kt + kk;
                        acc += double(x[xi]) * w[wi];
                        ref.dx[xi] += r[yi] * w[wi];
                        ref.dw[wi] += r[yi] * x[xi];
                    }
                ref.y[yi] = float(acc);
            }
    return ref;
}

template <std::size_t N>
void check_case(const ConvCase& t) {
    constexpr std::size_t D = N + 2;
    auto shape_of = [](std::size_t a, std::size_t b, const A3& s) {
        std::vector<std::size_t> v{a, b};
        for (std::size_t i = 3 - N; i < 3; ++i) v.push_back(s[i]);
        return ember::Shape(std::span<const std::size_t>(v));
    };
    auto arr = [](const A3& s) {
        std::array<std::size_t, N> a{};
        for (std::size_t i = 0; i < N; ++i) a[i] = s[3 - N + i];
        return a;
    };
    const auto xs = shape_of(t.n, t.c, t.in), ws = shape_of(t.co, t.c / t.groups, t.k),
               ys = shape_of(t.n, t.co, t.out());
    const auto x = ints(xs.num_elements(), 7, 3), w = ints(ws.num_elements(), 5, 2),
               b = ints(t.co, 3, 1), r = ints(ys.num_elements(), 3, 1);
    const Reference ref = reference(t, x, w, b, r);
    const ember::ConvOptions<N> o{arr(t.stride), arr(t.pad), arr(t.dil), t.groups};
    for (const bool im2col : {false, true}) {
        INFO(t.name << (im2col ? ", im2col + matmul" : ", as conv.cpp chooses"));
        if (im2col) ::setenv("EMBER_VULKAN_CONV", "im2col", 1);
        auto xt = Tensor<AD, D>::from_data(ember::TensorData(x, xs)).require_grad();
        auto wt = Tensor<AD, D>::from_data(ember::TensorData(w, ws)).require_grad();
        std::optional<Tensor<AD, 1>> bt;
        if (t.bias) bt = Tensor<AD, 1>::from_data(ember::TensorData(b, {t.co}));
        Tensor<AD, D> y = [&] {
            if constexpr (N == 1)
                return ember::module::conv1d(xt, wt, bt, o);
            else if constexpr (N == 2)
                return ember::module::conv2d(xt, wt, bt, o);
            else
                return ember::module::conv3d(xt, wt, bt, o);
        }();
        const auto rt = Tensor<AD, D>::from_data(ember::TensorData(r, ys));
        auto grads = (y * rt).sum().backward();
        const auto yv = y.to_data().template to_vec<float>();
        const auto dx = xt.grad(grads)->to_data().template to_vec<float>();
        const auto dw = wt.grad(grads)->to_data().template to_vec<float>();
        ::unsetenv("EMBER_VULKAN_CONV");
        CHECK(yv == ref.y);
        CHECK(dx == ref.dx);
        CHECK(dw == ref.dw);
    }
}
}  // namespace

TEST_CASE("vulkan: direct and im2col convolutions equal the sums, with both gradients",
          "[vulkan][conv]") {
    if (!ember::vulkan::is_available()) {
        WARN("skipped: no Vulkan device");
        return;
    }
    // name, N, C, C_out, groups, in, k, stride, pad, dil, bias
    SECTION("2-d: stride, padding, dilation and groups differing by axis") {
        check_case<2>(
            {"2-d", 3, 4, 6, 2, {1, 9, 7}, {1, 3, 3}, {1, 2, 1}, {0, 1, 2}, {1, 1, 2}, true});
    }
    SECTION("2-d: one input channel, as the guide CNN's first layer (many slices of the batch)") {
        check_case<2>({"2-d guide",
                       24,
                       1,
                       8,
                       1,
                       {1, 14, 14},
                       {1, 3, 3},
                       {1, 1, 1},
                       {0, 0, 0},
                       {1, 1, 1},
                       true});
    }
    SECTION("2-d: a 1x1 kernel and a 5x5 one") {
        check_case<2>(
            {"1x1", 2, 6, 5, 1, {1, 5, 4}, {1, 1, 1}, {1, 1, 1}, {0, 0, 0}, {1, 1, 1}, false});
        check_case<2>(
            {"5x5", 2, 3, 4, 1, {1, 8, 9}, {1, 5, 5}, {1, 2, 2}, {0, 2, 1}, {1, 1, 1}, true});
    }
    SECTION("1-d, depthwise") {
        check_case<1>(
            {"1-d", 2, 3, 3, 3, {1, 1, 11}, {1, 1, 4}, {1, 1, 3}, {0, 0, 2}, {1, 1, 1}, true});
    }
    SECTION("3-d") {
        check_case<3>(
            {"3-d", 2, 2, 4, 1, {5, 4, 6}, {2, 3, 2}, {1, 2, 1}, {1, 0, 1}, {2, 1, 1}, false});
    }
}

}  // namespace test_vulkan_conv

#endif
