// The CPU's layer-norm kernels beyond the forward (backends/cpu/norm.cpp):
// CpuBackend::float_layer_norm_backward, which Autodiff<Cpu> runs for every layer_norm and
// LayerNorm (one pass over the rows, with the gradient x already collected added in the same
// pass), and float_add_layer_norm, module::add_layer_norm in one pass. The PyTorch fixtures of
// layer_norm, add_layer_norm and LayerNorm (test_module_ops.cpp, test_nn_general.cpp, the
// autodiff suite) go through them; here: dx, dgamma and dbeta against the formulas written out
// in double, on rows that are not a multiple of the 8-wide vectors and row counts across the
// kernel's blocks of rows; the gradients of add_layer_norm and layer_norm under Autodiff<Cpu>
// against the same loss through the composed ops (sum, mean, variance, division); the fused
// forward bit for bit equal to the addition and layer_norm it replaces; results at 1 and 3
// threads; and what the kernels decline (the caller composes).
#include <cmath>
#include <cstddef>
#include <optional>
#include <vector>

#include "harness.hpp"

namespace test_cpu_layer_norm {

namespace {

using ember::DType;
using ember::Shape;
using ember::Tensor;
using ember::TensorData;
using C = ember::Cpu;
using AD = ember::Autodiff<ember::Cpu>;

struct ThreadsGuard {
    std::size_t before = ember::cpu::num_threads();
    ~ThreadsGuard() { ember::cpu::set_num_threads(before); }
};

std::vector<float> pattern(std::size_t n, std::size_t a, std::size_t m, float div, float off) {
    std::vector<float> v(n);
    for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<float>((i * a) % m) / div - off;
    return v;
}

std::vector<double> values(const ember::detail::cpu::CpuTensor& t) {
    return Tensor<C, 1>(t).to_data().convert(DType::F64).template to_vec<double>();
}

// dx, dgamma and dbeta of y = x̂·gamma (+ beta) for dL/dy = g, in double from the definitions:
// x̂ = (x − μ)·rstd, g' = g·γ, dx = rstd·(g' − mean(g') − x̂·mean(g'·x̂)) (+ acc), dγ = Σ g·x̂,
// dβ = Σ g.
struct Reference {
    std::vector<double> dx, dgamma, dbeta;
};

Reference reference(std::size_t rows, std::size_t cols, const std::vector<float>& x,
                    const std::vector<float>& g, const std::vector<float>* gamma,
                    const std::vector<float>* acc, double eps) {
    Reference r{std::vector<double>(rows * cols), std::vector<double>(cols, 0.0),
                std::vector<double>(cols, 0.0)};
    for (std::size_t i = 0; i < rows; ++i) {
        const float* xr = x.data() + i * cols;
        const float* gr = g.data() + i * cols;
        double mu = 0, var = 0;
        for (std::size_t c = 0; c < cols; ++c) mu += xr[c];
        mu /= double(cols);
        for (std::size_t c = 0; c < cols; ++c) var += (xr[c] - mu) * (xr[c] - mu);
        const double rstd = 1 / std::sqrt(var / double(cols) + eps);
        double m1 = 0, m2 = 0;
        for (std::size_t c = 0; c < cols; ++c) {
            const double xh = (xr[c] - mu) * rstd, gg = gr[c] * (gamma ? (*gamma)[c] : 1.0);
            m1 += gg / double(cols);
            m2 += gg * xh / double(cols);
            r.dgamma[c] += gr[c] * xh;
            r.dbeta[c] += gr[c];
        }
        for (std::size_t c = 0; c < cols; ++c) {
            const double xh = (xr[c] - mu) * rstd, gg = gr[c] * (gamma ? (*gamma)[c] : 1.0);
            r.dx[i * cols + c] = rstd * (gg - m1 - xh * m2) + (acc ? (*acc)[i * cols + c] : 0.0);
        }
    }
    return r;
}

void check_values(const std::vector<double>& got, const std::vector<double>& want, double tol) {
    REQUIRE(got.size() == want.size());
    std::size_t bad = 0;
    for (std::size_t i = 0; i < got.size(); ++i)
        if (!(std::abs(got[i] - want[i]) <= tol * (1 + std::abs(want[i])))) {
            if (bad++ < 5) CHECK(got[i] == Approx(want[i]).epsilon(tol).margin(tol));
        }
    CHECK(bad == 0);
}

// Layer norm composed of elementary ops over the last dim of a [rows, cols] x (each op's
// gradient is the shared suite's): the path Autodiff takes where a backend has no kernel.
Tensor<AD, 2> composed_norm(const Tensor<AD, 2>& x, const std::optional<Tensor<AD, 1>>& gamma,
                            const std::optional<Tensor<AD, 1>>& beta, double eps) {
    const auto centered = x - x.mean_dim(1);
    const auto var = (centered * centered).mean_dim(1);
    auto y = centered / (var + eps).sqrt();
    if (gamma) y = y * gamma->unsqueeze();
    if (beta) y = y + beta->unsqueeze();
    return y;
}

}  // namespace

TEST_CASE("cpu layer norm: float_layer_norm_backward matches the definition",
          "[cpu][norm][layer_norm]") {
    constexpr double eps = 1e-5;
    // Rows of 768 (the GPT's), 13 and 5 (vector tails), 40; row counts within one block of
    // rows, across several, and 20000 (over 1024 blocks: the kernel's blocks grow past 16 rows).
    const std::pair<std::size_t, std::size_t> shapes[] = {
        {37, 768}, {100, 13}, {1, 5}, {2000, 40}, {20000, 9}};
    for (const auto [rows, cols] : shapes)
        for (const bool affine : {true, false})
            for (const bool with_acc : {false, true}) {
                INFO("rows " << rows << ", cols " << cols << (affine ? ", gamma" : "")
                             << (with_acc ? ", acc" : ""));
                const auto xs = pattern(rows * cols, 37, 101, 17.f, 3.f);
                const auto gs = pattern(rows * cols, 53, 89, 29.f, 1.5f);
                const auto as = pattern(rows * cols, 11, 23, 7.f, 1.f);
                const auto gam = pattern(cols, 7, 40, 20.f, -0.5f);
                const auto x = Tensor<C, 2>::from_data(TensorData(xs, {rows, cols}), {});
                const auto g = Tensor<C, 2>::from_data(TensorData(gs, {rows, cols}), {});
                std::optional<Tensor<C, 1>> gamma;
                if (affine) gamma = Tensor<C, 1>::from_data(TensorData(gam, {cols}), {});
                std::optional<C::FT> gp, acc;
                if (gamma) gp = gamma->primitive();
                if (with_acc)
                    acc = Tensor<C, 2>::from_data(TensorData(as, {rows, cols}), {}).primitive();
                const auto fwd = C::float_layer_norm(x.primitive(), gp, std::nullopt, eps);
                const auto got = C::float_layer_norm_backward(x.primitive(), g.primitive(), gp,
                                                              fwd[1], fwd[2], acc);
                REQUIRE(got.has_value());
                const auto want = reference(rows, cols, xs, gs, affine ? &gam : nullptr,
                                            with_acc ? &as : nullptr, eps);
                CHECK((*got)[0].shape == Shape{rows, cols});
                check_values(values(C::float_reshape((*got)[0], Shape{rows * cols})), want.dx,
                             2e-5);
                if (affine) {
                    // Sums over up to 20000 rows: f32 partials over blocks of rows.
                    check_values(values((*got)[1]), want.dgamma, 2e-5);
                    check_values(values((*got)[2]), want.dbeta, 2e-5);
                } else {
                    CHECK((*got)[1].num_elements() == 0);
                    CHECK((*got)[2].num_elements() == 0);
                }
            }
}

TEST_CASE("cpu layer norm: add_layer_norm's and layer_norm's gradients match the composed ops",
          "[cpu][norm][layer_norm][autodiff]") {
    const std::size_t rows = 70, cols = 77;
    const auto xs = pattern(rows * cols, 37, 101, 17.f, 3.f);
    const auto rs = pattern(rows * cols, 53, 89, 29.f, 1.5f);
    const auto w1 = pattern(rows * cols, 13, 31, 9.f, 1.7f);
    const auto w2 = pattern(rows * cols, 19, 43, 11.f, 2.f);
    const auto gam = pattern(cols, 7, 40, 20.f, -0.5f), bet = pattern(cols, 5, 7, 7.f, 0.5f);
    for (const bool affine : {true, false}) {
        INFO((affine ? "gamma and beta" : "no affine"));
        auto run = [&](bool fused) {
            auto x = Tensor<AD, 2>::from_data(TensorData(xs, {rows, cols}), {}).require_grad();
            auto r = Tensor<AD, 2>::from_data(TensorData(rs, {rows, cols}), {}).require_grad();
            std::optional<Tensor<AD, 1>> gamma, beta;
            if (affine) {
                gamma = Tensor<AD, 1>::from_data(TensorData(gam, {cols}), {}).require_grad();
                beta = Tensor<AD, 1>::from_data(TensorData(bet, {cols}), {}).require_grad();
            }
            const auto g1 = Tensor<AD, 2>::from_data(TensorData(w1, {rows, cols}), {});
            const auto g2 = Tensor<AD, 2>::from_data(TensorData(w2, {rows, cols}), {});
            // A pre-norm block's pattern: the sum feeds the residual stream (g2) and is normed
            // (g1); a plain layer_norm of the sum after it (its gradient reaches the sum from
            // two uses, the second one through the kernel's accumulated dx).
            auto both = [&]() -> ember::module::AddLayerNormOutput<AD, 2> {
                if (fused) return ember::module::add_layer_norm(x, r, gamma, beta, 1e-5);
                const auto s = x + r;
                return {s, composed_norm(s, gamma, beta, 1e-5)};
            }();
            const auto& sum = both.sum;
            const auto& normed = both.normed;
            const auto plain = fused ? ember::module::layer_norm(sum, gamma, std::nullopt, 1e-3)
                                     : composed_norm(sum, gamma, std::nullopt, 1e-3);
            auto loss = (normed * g1).sum() + (sum * g2).sum() + (plain * plain).sum() * 0.25;
            auto grads = loss.backward();
            std::vector<TensorData> v{normed.to_data(), plain.to_data(), x.grad(grads)->to_data(),
                                      r.grad(grads)->to_data()};
            if (affine) {
                v.push_back(gamma->grad(grads)->to_data());
                v.push_back(beta->grad(grads)->to_data());
            }
            return v;
        };
        const auto fused = run(true), composed = run(false);
        REQUIRE(fused.size() == composed.size());
        const char* what[] = {"normed", "plain", "dx", "dresidual", "dgamma", "dbeta"};
        for (std::size_t i = 0; i < fused.size(); ++i) {
            INFO(what[i]);
            ember::test::check_close(fused[i], composed[i], {2e-5, 2e-4});
        }
    }
}

TEST_CASE("cpu layer norm: float_add_layer_norm gives the addition's and layer_norm's values",
          "[cpu][norm][layer_norm]") {
    // The sum is x + residual and the norm layer_norm's own row kernel on it: bit for bit.
    for (const std::size_t cols : {std::size_t{768}, std::size_t{516}, std::size_t{5}}) {
        INFO("cols " << cols);
        const std::size_t rows = 37;
        const auto x = Tensor<C, 2>::from_data(
            TensorData(pattern(rows * cols, 37, 101, 17.f, 3.f), {rows, cols}), {});
        const auto r = Tensor<C, 2>::from_data(
            TensorData(pattern(rows * cols, 53, 89, 29.f, 1.5f), {rows, cols}), {});
        const auto gamma =
            Tensor<C, 1>::from_data(TensorData(pattern(cols, 7, 40, 20.f, -0.5f), {cols}), {});
        const auto beta =
            Tensor<C, 1>::from_data(TensorData(pattern(cols, 5, 7, 7.f, 0.5f), {cols}), {});
        for (const bool affine : {true, false}) {
            std::optional<C::FT> gp, bp;
            if (affine) {
                gp = gamma.primitive();
                bp = beta.primitive();
            }
            auto fused =
                C::float_add_layer_norm(x.primitive(), r.primitive(), gp, bp, 1e-5, std::nullopt);
            REQUIRE(fused.has_value());
            const auto sum = x + r;
            const auto normed =
                affine ? ember::module::layer_norm(sum, gamma, beta, 1e-5)
                       : ember::module::layer_norm(sum, std::nullopt, std::nullopt, 1e-5);
            const auto stats = C::float_layer_norm(sum.primitive(), gp, bp, 1e-5);
            CHECK(Tensor<C, 2>((*fused)[0]).to_data().template to_vec<float>() ==
                  sum.to_data().template to_vec<float>());
            CHECK(Tensor<C, 2>((*fused)[1]).to_data().template to_vec<float>() ==
                  normed.to_data().template to_vec<float>());
            CHECK(Tensor<C, 2>((*fused)[2]).to_data().template to_vec<float>() ==
                  Tensor<C, 2>(stats[1]).to_data().template to_vec<float>());
            CHECK(Tensor<C, 2>((*fused)[3]).to_data().template to_vec<float>() ==
                  Tensor<C, 2>(stats[2]).to_data().template to_vec<float>());
        }
    }
}

TEST_CASE("cpu layer norm: results do not depend on the thread count", "[cpu][norm][layer_norm]") {
    const ThreadsGuard guard;
    const std::size_t rows = 2000, cols = 40;
    const auto x = Tensor<C, 2>::from_data(
        TensorData(pattern(rows * cols, 37, 101, 17.f, 3.f), {rows, cols}), {});
    const auto r = Tensor<C, 2>::from_data(
        TensorData(pattern(rows * cols, 53, 89, 29.f, 1.5f), {rows, cols}), {});
    const auto g = Tensor<C, 2>::from_data(
        TensorData(pattern(rows * cols, 13, 31, 9.f, 1.7f), {rows, cols}), {});
    const auto gamma =
        Tensor<C, 1>::from_data(TensorData(pattern(cols, 7, 40, 20.f, -0.5f), {cols}), {});
    auto run = [&] {
        auto f = C::float_add_layer_norm(x.primitive(), r.primitive(), gamma.primitive(),
                                         std::nullopt, 1e-5, std::nullopt);
        REQUIRE(f.has_value());
        auto b = C::float_layer_norm_backward((*f)[0], g.primitive(), gamma.primitive(), (*f)[2],
                                              (*f)[3], x.primitive());
        REQUIRE(b.has_value());
        std::vector<std::vector<float>> out;
        for (const auto& t : {(*f)[1], (*b)[0], (*b)[1], (*b)[2]})
            out.push_back(Tensor<C, 1>(C::float_reshape(t, Shape{t.num_elements()}))
                              .to_data()
                              .template to_vec<float>());
        return out;
    };
    ember::cpu::set_num_threads(1);
    const auto one = run();
    ember::cpu::set_num_threads(3);
    const auto three = run();
    for (std::size_t i = 0; i < one.size(); ++i) {
        INFO("output " << i);
        CHECK(one[i] == three[i]);
    }
}

TEST_CASE("cpu layer norm: the kernels decline what they do not take", "[cpu][norm][layer_norm]") {
    // f64 and bf16 operands, a 16-bit normed output, mismatched shapes: nothing (Autodiff and
    // module::add_layer_norm then compose), never a wrong result.
    const auto x = Tensor<C, 2>::ones({3, 4}, {});
    const auto x64 = x.cast(DType::F64), x16 = x.cast(DType::BF16);
    const auto fwd = C::float_layer_norm(x.primitive(), std::nullopt, std::nullopt, 1e-5);
    const std::optional<C::FT> none;
    CHECK_FALSE(
        C::float_add_layer_norm(x64.primitive(), x64.primitive(), none, none, 1e-5, std::nullopt));
    CHECK_FALSE(
        C::float_add_layer_norm(x.primitive(), x16.primitive(), none, none, 1e-5, std::nullopt));
    CHECK_FALSE(
        C::float_add_layer_norm(x.primitive(), x.primitive(), none, none, 1e-5, DType::BF16));
    CHECK_FALSE(C::float_add_layer_norm(x.primitive(), Tensor<C, 2>::ones({4, 3}, {}).primitive(),
                                        none, none, 1e-5, std::nullopt));
    CHECK_FALSE(C::float_layer_norm_backward(x.primitive(), x16.primitive(), none, fwd[1], fwd[2]));
    CHECK_FALSE(
        C::float_layer_norm_backward(x64.primitive(), x64.primitive(), none, fwd[1], fwd[2]));
    CHECK_FALSE(C::float_layer_norm_backward(
        x.primitive(), Tensor<C, 2>::ones({4, 3}, {}).primitive(), none, fwd[1], fwd[2]));
    // And module::add_layer_norm composes them: the same values as the addition and layer_norm.
    const auto r16 = Tensor<C, 2>::from_data(TensorData(pattern(12, 5, 7, 3.f, 1.f), {3, 4}), {})
                         .cast(DType::BF16);
    const auto o = ember::module::add_layer_norm(x, r16);
    CHECK(o.normed.to_data().template to_vec<float>() ==
          ember::module::layer_norm(x + r16, std::nullopt, std::nullopt, 1e-5)
              .to_data()
              .template to_vec<float>());
}

}  // namespace test_cpu_layer_norm
