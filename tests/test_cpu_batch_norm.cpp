// The CPU's fused batch norm (backends/cpu/batch_norm.cpp: CpuBackend::float_batch_norm,
// _backward, _eval), which nn::BatchNorm now runs on every CPU stack. The PyTorch fixtures of
// nn::BatchNorm (test_nn_general.cpp, test_models.cpp) go through it; here: the output, the
// statistics, the running state and the gradients of L = Σ y·w against a double-precision
// reference written out from the definitions, on shapes with odd plane sizes, a [N, C] input, a
// large offset (where E[x²] − mean² would lose the variance) and f64/bf16 data; the gradients
// against f64 finite differences; the eval kernel; thread-count independence; operand errors.
#include <cmath>
#include <cstddef>
#include <vector>

#include <ember/nn/norm.hpp>

#include "harness.hpp"

namespace {

using ember::DType;
using ember::Shape;
using ember::Tensor;
using ember::TensorData;
namespace nn = ember::nn;
using AD = ember::Autodiff<ember::Cpu>;
using AD64 = ember::Autodiff<ember::CpuF64>;  // data enters as f64: exact finite differences

// Restores the pool's size when a case ends.
struct ThreadsGuard {
    std::size_t before = ember::cpu::num_threads();
    ~ThreadsGuard() { ember::cpu::set_num_threads(before); }
};

std::vector<double> values(const TensorData& d) {
    return d.convert(DType::F64).template to_vec<double>();
}

// Batch norm by its definition, in double: y, dx, dgamma, dbeta for L = Σ y·w, the batch mean
// and biased variance, and the running state after one update (unbiased variance).
struct Reference {
    std::vector<double> y, dx, dgamma, dbeta, mean, var, running_mean, running_var;
};

Reference reference(const Shape& shape, const std::vector<double>& x, const std::vector<double>& w,
                    const std::vector<double>& gamma, const std::vector<double>& beta, double eps,
                    double momentum) {
    const std::size_t n = shape[0], c = shape[1], hw = shape.num_elements() / (n * c);
    const double m = double(n * hw);
    Reference r;
    r.y.resize(x.size());
    r.dx.resize(x.size());
    for (std::size_t ch = 0; ch < c; ++ch) {
        auto at = [&](std::size_t q, std::size_t i) { return (q * c + ch) * hw + i; };
        double mean = 0, var = 0, sdy = 0, sdyxh = 0;
        for (std::size_t q = 0; q < n; ++q)
            for (std::size_t i = 0; i < hw; ++i) mean += x[at(q, i)];
        mean /= m;
        for (std::size_t q = 0; q < n; ++q)
            for (std::size_t i = 0; i < hw; ++i) var += (x[at(q, i)] - mean) * (x[at(q, i)] - mean);
        var /= m;
        const double rstd = 1 / std::sqrt(var + eps);
        for (std::size_t q = 0; q < n; ++q)
            for (std::size_t i = 0; i < hw; ++i) {
                const double xh = (x[at(q, i)] - mean) * rstd;
                r.y[at(q, i)] = xh * gamma[ch] + beta[ch];
                sdy += w[at(q, i)];
                sdyxh += w[at(q, i)] * xh;
            }
        for (std::size_t q = 0; q < n; ++q)
            for (std::size_t i = 0; i < hw; ++i) {
                const double xh = (x[at(q, i)] - mean) * rstd;
                r.dx[at(q, i)] = gamma[ch] * rstd * (w[at(q, i)] - sdy / m - xh * sdyxh / m);
            }
        r.dgamma.push_back(sdyxh);
        r.dbeta.push_back(sdy);
        r.mean.push_back(mean);
        r.var.push_back(var);
        r.running_mean.push_back(momentum * mean);
        r.running_var.push_back((1 - momentum) + momentum * var * m / (m - 1));
    }
    return r;
}

void check_values(const char* what, const std::vector<double>& got, const std::vector<double>& want,
                  double tol) {
    INFO(what);
    REQUIRE(got.size() == want.size());
    for (std::size_t i = 0; i < got.size(); ++i) {
        INFO("element " << i);
        CHECK(got[i] == Approx(want[i]).epsilon(tol).margin(tol));
    }
}

// Values (exact in f32 unless B computes in f64) as a tensor of B in dtype dt.
template <std::size_t D, typename B = AD>
Tensor<B, D> data_tensor(const std::vector<double>& v, const Shape& s, DType dt) {
    return Tensor<B, 1>::from_data(TensorData(v, Shape{v.size()})).cast(dt).template reshape<D>(s);
}

// One training-mode BatchNorm on Autodiff<Cpu> (f64: on Autodiff<CpuF64>, whose parameters and
// running state are f64 too) in `dt`, against the reference.
template <std::size_t D, typename B = AD>
void check_training(const Shape& shape, double offset, DType dt, double tol) {
    const std::size_t c = shape[1];
    ember::Cpu::seed(17);
    auto rnd = [&](const Shape& s, double lo, double hi) {
        return values(
            Tensor<ember::Cpu, 1>::random({s.num_elements()}, ember::Distribution::Uniform(lo, hi))
                .to_data());
    };
    std::vector<double> x = rnd(shape, -2, 2), w = rnd(shape, -1, 1);
    for (double& v : x) v = double(float(v + offset));  // what the f32 tensor holds
    const std::vector<double> gamma = rnd(Shape{c}, 0.5, 1.5), beta = rnd(Shape{c}, -1, 1);
    if (dt == DType::BF16) {  // the reference reads what the kernel reads
        const auto xb = Tensor<ember::Cpu, 1>::from_data(
                            TensorData(std::vector<float>(x.begin(), x.end()), Shape{x.size()}))
                            .cast(DType::BF16);
        x = values(xb.to_data());
    }
    const Reference want = reference(shape, x, w, gamma, beta, 1e-5, 0.1);

    const DType pd = dt == DType::F64 ? DType::F64 : DType::F32;
    auto bn = nn::BatchNormConfig{c}.init<B>();
    bn.gamma = ember::Param<Tensor<B, 1>>(data_tensor<1, B>(gamma, Shape{c}, pd));
    bn.beta = ember::Param<Tensor<B, 1>>(data_tensor<1, B>(beta, Shape{c}, pd));
    auto xt = data_tensor<D, B>(x, shape, dt).require_grad();
    auto y = bn.forward(xt);
    CHECK(y.dtype() == dt);
    auto grads = (y.cast(DType::F64) * data_tensor<D, B>(w, shape, DType::F64)).sum().backward();
    check_values("y", values(y.to_data()), want.y, dt == DType::BF16 ? 1e-2 : tol);
    check_values("dx", values(xt.grad(grads)->to_data()), want.dx, tol);
    check_values("dgamma", values(bn.gamma.val().grad(grads)->to_data()), want.dgamma, tol);
    check_values("dbeta", values(bn.beta.val().grad(grads)->to_data()), want.dbeta, tol);
    check_values("running mean", values(bn.running_mean.value().to_data()), want.running_mean, tol);
    check_values("running var", values(bn.running_var.value().to_data()), want.running_var, tol);
}

}  // namespace

TEST_CASE("cpu batch norm: training forward, statistics and gradients match the definition",
          "[cpu][batchnorm]") {
    // Scaled tolerances: f32 sums over a few hundred values, against exact double sums.
    SECTION("odd plane sizes") {
        check_training<4>(Shape{3, 5, 7, 3}, 0.0, DType::F32, 2e-4);
    }
    SECTION("planes of 16 and more (the vector loops)") {
        check_training<4>(Shape{4, 3, 6, 6}, 0.0, DType::F32, 2e-4);
    }
    SECTION("[N, C] as BatchNorm1d") {
        check_training<2>(Shape{37, 6}, 0.0, DType::F32, 2e-4);
    }
    SECTION("a large offset: the centered variance keeps its digits") {
        check_training<4>(Shape{4, 2, 5, 5}, 1000.0, DType::F32, 2e-3);
    }
    SECTION("f64 data computes in f64") {
        check_training<4, AD64>(Shape{3, 4, 5, 3}, 3.0, DType::F64, 1e-10);
    }
    SECTION("bf16 data: statistics in f32, y in bf16") {
        check_training<4>(Shape{4, 3, 4, 4}, 0.0, DType::BF16, 2e-2);
    }
}

TEST_CASE("cpu batch norm: gradients match f64 finite differences", "[cpu][batchnorm]") {
    const Shape shape{3, 2, 5, 1};
    const std::size_t c = shape[1], n = shape.num_elements();
    ember::Cpu::seed(9);
    auto rnd = [](std::size_t k, double lo, double hi) {
        return values(
            Tensor<ember::Cpu, 1>::random({k}, ember::Distribution::Uniform(lo, hi)).to_data());
    };
    const std::vector<std::vector<double>> inputs{rnd(n, -1, 3), rnd(c, 0.5, 1.5), rnd(c, -1, 1)};
    const std::vector<double> w = rnd(n, -1, 1);
    // L(x, gamma, beta) in f64 with h added to element i of operand k (-1: none).
    auto loss = [&](int k, std::size_t i, double h, bool track) {
        std::vector<std::vector<double>> in = inputs;
        if (k >= 0) in[static_cast<std::size_t>(k)][i] += h;
        auto bn = nn::BatchNormConfig{c}.init<AD64>();
        bn.gamma = ember::Param<Tensor<AD64, 1>>(data_tensor<1, AD64>(in[1], Shape{c}, DType::F64));
        bn.beta = ember::Param<Tensor<AD64, 1>>(data_tensor<1, AD64>(in[2], Shape{c}, DType::F64));
        auto xt = data_tensor<4, AD64>(in[0], shape, DType::F64);
        if (track) xt = xt.require_grad();
        auto l = (bn.forward(xt) * data_tensor<4, AD64>(w, shape, DType::F64)).sum();
        const double v = values(l.to_data())[0];
        std::vector<std::vector<double>> g;
        if (track) {
            auto grads = l.backward();
            g = {values(xt.grad(grads)->to_data()), values(bn.gamma.val().grad(grads)->to_data()),
                 values(bn.beta.val().grad(grads)->to_data())};
        }
        return std::make_pair(v, g);
    };
    const auto analytic = loss(-1, 0, 0, true).second;
    for (int k = 0; k < 3; ++k) {
        const auto& got = analytic[static_cast<std::size_t>(k)];
        REQUIRE(got.size() == inputs[static_cast<std::size_t>(k)].size());
        for (std::size_t i = 0; i < got.size(); ++i) {
            const double h = 1e-5;
            const double fd = (loss(k, i, h, false).first - loss(k, i, -h, false).first) / (2 * h);
            INFO("operand " << k << " element " << i);
            CHECK(got[i] == Approx(fd).epsilon(1e-6).margin(1e-7));
        }
    }
}

TEST_CASE("cpu batch norm: eval mode uses the running statistics", "[cpu][batchnorm]") {
    const Shape shape{2, 3, 4, 5};
    const std::size_t c = 3;
    ember::Cpu::seed(23);
    auto x = Tensor<ember::Cpu, 4>::random(shape, ember::Distribution::Normal(1, 2));
    auto bn = nn::BatchNormConfig{c}.init<ember::Cpu>();
    const std::vector<double> mean{0.5, -1.0, 2.0}, var{0.25, 2.0, 1.5}, gamma{1.5, 0.5, -1.0},
        beta{0.1, 0.2, -0.3};
    auto vec = [](const std::vector<double>& v) {
        return Tensor<ember::Cpu, 1>::from_data(
            TensorData(std::vector<float>(v.begin(), v.end()), Shape{v.size()}));
    };
    bn.running_mean = ember::RunningState<Tensor<ember::Cpu, 1>>(vec(mean));
    bn.running_var = ember::RunningState<Tensor<ember::Cpu, 1>>(vec(var));
    bn.gamma = ember::Param<Tensor<ember::Cpu, 1>>(vec(gamma));
    bn.beta = ember::Param<Tensor<ember::Cpu, 1>>(vec(beta));
    const auto xs = values(x.to_data());
    const auto ys = values(bn.forward(x).to_data());
    REQUIRE(ys.size() == xs.size());
    const std::size_t hw = 20;
    for (std::size_t i = 0; i < xs.size(); ++i) {
        const std::size_t ch = (i / hw) % c;
        const double want = (xs[i] - mean[ch]) / std::sqrt(var[ch] + 1e-5) * gamma[ch] + beta[ch];
        INFO("element " << i);
        CHECK(ys[i] == Approx(want).epsilon(1e-5).margin(1e-5));
    }
}

TEST_CASE("cpu batch norm: results do not depend on the thread count", "[cpu][batchnorm]") {
    ThreadsGuard guard;
    const Shape shape{8, 24, 9, 9};  // several channels a task, and tasks for every thread
    auto run = [&](std::size_t threads) {
        ember::cpu::set_num_threads(threads);
        ember::Cpu::seed(5);
        auto x = Tensor<AD, 4>::random(shape, ember::Distribution::Normal(0.5, 2)).require_grad();
        auto w = Tensor<AD, 4>::random(shape, ember::Distribution::Normal(0, 1));
        auto bn = nn::BatchNormConfig{24}.init<AD>();
        auto y = bn.forward(x);
        auto grads = (y * w).sum().backward();
        return std::vector<TensorData>{y.to_data(), x.grad(grads)->to_data(),
                                       bn.gamma.val().grad(grads)->to_data(),
                                       bn.running_var.value().to_data()};
    };
    const auto one = run(1);
    for (const std::size_t t : {2, 3, 8}) {
        const auto many = run(t);
        for (std::size_t i = 0; i < one.size(); ++i) {
            INFO(t << " threads, output " << i);
            CHECK(values(many[i]) == values(one[i]));
        }
    }
}

TEST_CASE("cpu batch norm: operands are checked", "[cpu][batchnorm][errors]") {
    using C = ember::Cpu;
    auto x = Tensor<C, 4>::zeros({2, 3, 2, 2}).into_primitive();
    auto v3 = Tensor<C, 1>::ones({3}).into_primitive();
    auto v4 = Tensor<C, 1>::ones({4}).into_primitive();
    CHECK_THROWS_AS(C::float_batch_norm(x, v4, v3, v3, v3, {1e-5, 0.1}), ember::ShapeError);
    CHECK_THROWS_WITH(C::float_batch_norm(x, v4, v3, v3, v3, {1e-5, 0.1}),
                      Catch::Contains("batch_norm") && Catch::Contains("[4]"));
    auto one = Tensor<C, 2>::zeros({1, 3}).into_primitive();
    CHECK_THROWS_AS(C::float_batch_norm(one, v3, v3, v3, v3, {1e-5, 0.1}), ember::ArgumentError);
    auto flat = Tensor<C, 1>::zeros({3}).into_primitive();
    CHECK_THROWS_AS(C::float_batch_norm_eval(flat, v3, v3, v3, v3, 1e-5), ember::ShapeError);
    auto dy = Tensor<C, 4>::zeros({2, 3, 2, 1}).into_primitive();
    CHECK_THROWS_WITH(C::float_batch_norm_backward(x, dy, v3, v3, v3),
                      Catch::Contains("batch_norm_backward") && Catch::Contains("[2, 3, 2, 1]"));
}
