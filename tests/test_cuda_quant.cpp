// The int8 Linear on CUDA (cuBLASLt, issue 11): static activations against the exact integer
// sums computed here, dynamic activations against the CPU's int8 Linear (the same parameters,
// rounding and epilogue), batch 1 (rows padded for cuBLASLt), non-zero weight zero points, and
// shapes cuBLASLt's int8 path does not take (the composed default, against PyTorch's exact
// fixture). Skipped without a GPU.
#if defined(EMBER_CUDA)
#include <cmath>
#include <vector>

#include <ember/backend/cuda.hpp>

#include "cuda_harness.hpp"
#include "harness.hpp"

namespace test_cuda_quant {

namespace {
using ember::Cpu;
using ember::Cuda;
using ember::Int;
using ember::Tensor;
using ember::TensorData;
using ember::quant::ActivationMode;
using ember::quant::ActivationQuantization;
using ember::quant::QuantizationScheme;

template <typename B>
Tensor<B, 2> q_linear(const Tensor<B, 2>& x, const ember::quant::QuantizedTensor<B, 2>& w,
                      const Tensor<B, 1>& bias, const ActivationQuantization& act) {
    return Tensor<B, 2>(B::q_linear(x.primitive(), w.primitive(), bias.primitive(), act));
}
}  // namespace

TEST_CASE("cuda int8 Linear: static activations give the exact integer sums", "[cuda][quant]") {
    REQUIRE_GPU();
    const std::size_t m = 5, k = 12, n = 8;
    const int wz = 3, az = -2;
    const float ws = 0.05f, as = 0.1f;
    std::vector<std::int8_t> wq(k * n);
    for (std::size_t j = 0; j < k; ++j)
        for (std::size_t c = 0; c < n; ++c)
            wq[j * n + c] = static_cast<std::int8_t>(int((j * 37 + c * 11) % 255) - 127);
    // Activations that quantize exactly to chosen integers q (far from rounding ties).
    std::vector<int> q(m * k);
    std::vector<float> x(m * k);
    for (std::size_t i = 0; i < m * k; ++i) {
        q[i] = int((i * 53) % 251) - 125;
        x[i] = static_cast<float>(q[i] - az) * as;
    }
    std::vector<float> bias(n);
    for (std::size_t c = 0; c < n; ++c) bias[c] = 0.25f * float(c) - 1.0f;

    ember::quant::QuantizationParameters<Cuda> qp{
        Tensor<Cuda, 1>::from_data(TensorData({ws}, {1}), {}),
        Tensor<Cuda, 1, Int>::from_data(TensorData(std::vector<std::int64_t>{wz}, {1}), {})};
    auto w = ember::quant::QuantizedTensor<Cuda, 2>::from_data(
        TensorData(wq, {k, n}), QuantizationScheme::per_tensor_affine(), qp);
    const ActivationQuantization act{ActivationMode::Static, as, az};
    auto y = q_linear(Tensor<Cuda, 2>::from_data(TensorData(x, {m, k}), {}), w,
                      Tensor<Cuda, 1>::from_data(TensorData(bias, {n}), {}), act)
                 .into_data()
                 .to_vec<float>();
    REQUIRE(y.size() == m * n);
    for (std::size_t r = 0; r < m; ++r)
        for (std::size_t c = 0; c < n; ++c) {
            std::int64_t s = 0;
            for (std::size_t j = 0; j < k; ++j)
                s += std::int64_t(q[r * k + j] - az) * (wq[j * n + c] - wz);
            const double want = double(s) * double(as) * double(ws) + bias[c];
            INFO("y[" << r << "][" << c << "] = " << y[r * n + c] << ", sum " << s);
            CHECK(std::abs(y[r * n + c] - want) <= 1e-6 + 1e-6 * std::abs(want));
        }
}

TEST_CASE("cuda int8 Linear: dynamic activations equal the CPU's int8 Linear", "[cuda][quant]") {
    REQUIRE_GPU();
    for (std::size_t m : {std::size_t{1}, std::size_t{3}, std::size_t{64}}) {
        INFO("batch " << m);
        const std::size_t k = 64, n = 32;
        ember::Cpu::seed(11 + m);
        auto xc = Tensor<Cpu, 2>::random({m, k}, ember::Distribution::Uniform(-3, 2));
        auto wc = Tensor<Cpu, 2>::random({k, n}, ember::Distribution::Uniform(-0.5, 0.5));
        auto bc = Tensor<Cpu, 1>::random({n}, ember::Distribution::Uniform(-0.2, 0.2));
        auto xg = Tensor<Cuda, 2>::from_data(xc.to_data(), {});
        auto wg = Tensor<Cuda, 2>::from_data(wc.to_data(), {});
        auto bg = Tensor<Cuda, 1>::from_data(bc.to_data(), {});
        for (auto scheme : {QuantizationScheme::per_channel_symmetric(1),
                            QuantizationScheme::per_tensor_affine()}) {
            INFO(scheme.to_string());
            const ActivationQuantization dynamic{};
            auto want = q_linear(xc, wc.quantize_dynamic(scheme), bc, dynamic);
            auto got = q_linear(xg, wg.quantize_dynamic(scheme), bg, dynamic);
            ember::test::check_close(got.to_data(), want.to_data(), {1e-5, 1e-5});
            // And near the float Linear: int8 keeps about 2 decimal digits.
            auto f32 = xc.matmul(wc) + bc.unsqueeze_dim<2>(0);
            ember::test::check_close(got.to_data(), f32.to_data(), {0.1, 0.05});
        }
    }
}

TEST_CASE("cuda int8 Linear: other shapes take the composed default", "[cuda][quant]") {
    REQUIRE_GPU();
    for (const char* name : {"linear_small", "linear_wide"}) {  // N = 6, K = 70: not multiples of 4
        INFO(name);
        ember::test::Fixture f("quant", name);
        auto x = f.named_tensor<Cuda, 2>("input");
        auto w = f.named_tensor<Cuda, 2>("weight").quantize_dynamic(
            QuantizationScheme::per_channel_symmetric(1));
        auto y = q_linear(x, w, f.named_tensor<Cuda, 1>("bias"), ActivationQuantization{});
        ember::test::check_close(y.to_data(), f.named("exact"), {1e-5, 1e-5});
    }
}

}  // namespace test_cuda_quant

#endif
