// The CPU's fused batch norm (backends/cpu/batch_norm.cpp: CpuBackend::float_batch_norm,
// _backward, _eval), which nn::BatchNorm now runs on every CPU stack. The PyTorch fixtures of
// nn::BatchNorm (test_nn_general.cpp, test_models.cpp) go through it; here: the output, the
// statistics, the running state and the gradients of L = Σ y·w against a double-precision
// reference written out from the definitions, on shapes with odd plane sizes, a [N, C] input, a
// large offset (where E[x²] − mean² would lose the variance) and f64/bf16 data; the gradients
// against f64 finite differences; the eval kernel; thread-count independence; operand errors.
// The same for the ReLU forms (float_batch_norm_relu and its backward, which nn::BatchNorm's
// forward_relu and forward_add_relu run in training: a ResNet block's relu(bn(x)) and
// relu(bn(x) + shortcut)): y and the gradients of L = Σ y·w (x, gamma, beta, the residual)
// against the reference, and against the composed ops (EMBER_CPU_BATCH_NORM_RELU=0: batch norm,
// addition, ReLU); bf16 with a residual declined (the composed ops round bn(x) to bf16 before
// the addition, as PyTorch does).
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <optional>
#include <vector>

#include <ember/nn/norm.hpp>

#include "harness.hpp"

namespace test_cpu_batch_norm {

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
    std::vector<std::vector<double>> inputs{rnd(n, -1, 3), rnd(c, 0.5, 1.5), rnd(c, -1, 1)};
    const std::vector<double> w = rnd(n, -1, 1);
    inputs.push_back(rnd(n, -1, 1));  // the residual of forward_add_relu
    // forward (x, gamma, beta), then forward_add_relu (and the residual: the fused ReLU kernels).
    for (const bool add_relu : {false, true}) {
        INFO((add_relu ? "forward_add_relu" : "forward"));
        // L in f64 with h added to element i of operand k (-1: none).
        auto loss = [&](int k, std::size_t i, double h, bool track) {
            std::vector<std::vector<double>> in = inputs;
            if (k >= 0) in[static_cast<std::size_t>(k)][i] += h;
            auto bn = nn::BatchNormConfig{c}.init<AD64>();
            bn.gamma =
                ember::Param<Tensor<AD64, 1>>(data_tensor<1, AD64>(in[1], Shape{c}, DType::F64));
            bn.beta =
                ember::Param<Tensor<AD64, 1>>(data_tensor<1, AD64>(in[2], Shape{c}, DType::F64));
            auto xt = data_tensor<4, AD64>(in[0], shape, DType::F64);
            auto rt = data_tensor<4, AD64>(in[3], shape, DType::F64);
            if (track) {
                xt = xt.require_grad();
                rt = rt.require_grad();
            }
            auto y = add_relu ? bn.forward_add_relu(xt, rt) : bn.forward(xt);
            auto l = (y * data_tensor<4, AD64>(w, shape, DType::F64)).sum();
            const double v = values(l.to_data())[0];
            std::vector<std::vector<double>> g;
            if (track) {
                auto grads = l.backward();
                g = {values(xt.grad(grads)->to_data()),
                     values(bn.gamma.val().grad(grads)->to_data()),
                     values(bn.beta.val().grad(grads)->to_data())};
                if (add_relu) {
                    g.push_back(values(rt.grad(grads)->to_data()));
                    // Some outputs clipped, or the ReLU's mask goes untested.
                    std::size_t zeros = 0;
                    for (const double e : values(y.to_data())) zeros += e == 0.0;
                    CHECK(zeros > 0);
                    CHECK(zeros < n);
                }
            }
            return std::make_pair(v, g);
        };
        const auto analytic = loss(-1, 0, 0, true).second;
        for (std::size_t k = 0; k < analytic.size(); ++k) {
            const auto& got = analytic[k];
            REQUIRE(got.size() == inputs[k].size());
            for (std::size_t i = 0; i < got.size(); ++i) {
                const double h = add_relu ? 1e-6 : 1e-5;
                const int kk = static_cast<int>(k);
                const double fd =
                    (loss(kk, i, h, false).first - loss(kk, i, -h, false).first) / (2 * h);
                INFO("operand " << k << " element " << i);
                CHECK(got[i] == Approx(fd).epsilon(1e-6).margin(1e-7));
            }
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

// ---- batch norm + (residual +) ReLU ---------------------------------------------------------

namespace {

// EMBER_CPU_BATCH_NORM_RELU=0 while it lives: nn::BatchNorm composes batch norm, add and ReLU.
struct ComposedGuard {
    ComposedGuard() { ::setenv("EMBER_CPU_BATCH_NORM_RELU", "0", 1); }
    ~ComposedGuard() { ::unsetenv("EMBER_CPU_BATCH_NORM_RELU"); }
};

std::vector<double> uniform(std::size_t n, double lo, double hi) {
    return values(
        Tensor<ember::Cpu, 1>::random({n}, ember::Distribution::Uniform(lo, hi)).to_data());
}

// max(bn(x) + r, 0) by the definitions, in double, and the gradients of L = Σ y·w.
struct ReluReference {
    std::vector<double> y, dx, dgamma, dbeta, dres;
};

ReluReference relu_reference(const Shape& shape, const std::vector<double>& x,
                             const std::vector<double>* r, const std::vector<double>& w,
                             const std::vector<double>& gamma, const std::vector<double>& beta,
                             double eps) {
    const Reference bn = reference(shape, x, w, gamma, beta, eps, 0.1);  // bn(x), mean, var
    const std::size_t n = shape[0], c = shape[1], hw = shape.num_elements() / (n * c);
    const double m = double(n * hw);
    ReluReference out;
    out.y.resize(x.size());
    out.dx.resize(x.size());
    out.dres.resize(x.size());
    for (std::size_t ch = 0; ch < c; ++ch) {
        auto at = [&](std::size_t q, std::size_t i) { return (q * c + ch) * hw + i; };
        const double rstd = 1 / std::sqrt(bn.var[ch] + eps);
        double sg = 0, sgxh = 0;  // Σ g and Σ g·x̂ of the masked gradient g = w·[y > 0]
        for (std::size_t q = 0; q < n; ++q)
            for (std::size_t i = 0; i < hw; ++i) {
                const std::size_t k = at(q, i);
                const double s = bn.y[k] + (r ? (*r)[k] : 0.0);
                out.y[k] = std::max(s, 0.0);
                out.dres[k] = s > 0 ? w[k] : 0.0;
                sg += out.dres[k];
                sgxh += out.dres[k] * (x[k] - bn.mean[ch]) * rstd;
            }
        for (std::size_t q = 0; q < n; ++q)
            for (std::size_t i = 0; i < hw; ++i) {
                const std::size_t k = at(q, i);
                const double xh = (x[k] - bn.mean[ch]) * rstd;
                out.dx[k] = gamma[ch] * rstd * (out.dres[k] - sg / m - xh * sgxh / m);
            }
        out.dgamma.push_back(sgxh);
        out.dbeta.push_back(sg);
    }
    return out;
}

// The values of a bf16 cast of v (what a bf16 tensor of v holds).
std::vector<double> as_bf16(const std::vector<double>& v) {
    return values(data_tensor<1>(v, Shape{v.size()}, DType::BF16).to_data());
}

// One training step's outputs of forward_relu (residual: forward_add_relu): y, dx, dgamma,
// dbeta, the residual's gradient (empty without), the running mean and variance.
struct Outputs {
    std::vector<std::vector<double>> v;
};

template <std::size_t D, typename B = AD>
Outputs run_block(const Shape& shape, const std::vector<double>& x, const std::vector<double>* r,
                  const std::vector<double>& w, const std::vector<double>& gamma,
                  const std::vector<double>& beta, DType dt) {
    const std::size_t c = shape[1];
    const DType pd = dt == DType::F64 ? DType::F64 : DType::F32;
    auto bn = nn::BatchNormConfig{c}.init<B>();
    bn.gamma = ember::Param<Tensor<B, 1>>(data_tensor<1, B>(gamma, Shape{c}, pd));
    bn.beta = ember::Param<Tensor<B, 1>>(data_tensor<1, B>(beta, Shape{c}, pd));
    auto xt = data_tensor<D, B>(x, shape, dt).require_grad();
    std::optional<Tensor<B, D>> rt;
    if (r) rt = data_tensor<D, B>(*r, shape, dt).require_grad();
    auto y = rt ? bn.forward_add_relu(xt, *rt) : bn.forward_relu(xt);
    CHECK(y.dtype() == dt);
    auto grads = (y.cast(DType::F64) * data_tensor<D, B>(w, shape, DType::F64)).sum().backward();
    Outputs o;
    o.v = {values(y.to_data()),
           values(xt.grad(grads)->to_data()),
           values(bn.gamma.val().grad(grads)->to_data()),
           values(bn.beta.val().grad(grads)->to_data()),
           rt ? values(rt->grad(grads)->to_data()) : std::vector<double>{},
           values(bn.running_mean.value().to_data()),
           values(bn.running_var.value().to_data())};
    return o;
}

const char* const kNames[] = {"y",         "dx",           "dgamma",     "dbeta",
                              "dresidual", "running mean", "running var"};

// forward_relu / forward_add_relu on random data: against the reference, and the fused kernels
// against the composed ops.
template <std::size_t D, typename B = AD>
void check_block(const Shape& shape, bool with_residual, DType dt, double tol) {
    const std::size_t c = shape[1], n = shape.num_elements();
    ember::Cpu::seed(31);
    std::vector<double> x = uniform(n, -2, 2), r = uniform(n, -1.5, 1.5), w = uniform(n, -1, 1);
    const std::vector<double> gamma = uniform(c, 0.5, 1.5), beta = uniform(c, -0.5, 0.5);
    if (dt == DType::BF16) {  // the reference reads what the kernels read
        x = as_bf16(x);
        r = as_bf16(r);
    }
    const std::vector<double>* rp = with_residual ? &r : nullptr;
    const ReluReference want = relu_reference(shape, x, rp, w, gamma, beta, 1e-5);
    const Outputs fused = run_block<D, B>(shape, x, rp, w, gamma, beta, dt);
    const double ytol = dt == DType::BF16 ? 1e-2 : tol;
    check_values("y", fused.v[0], want.y, ytol);
    check_values("dx", fused.v[1], want.dx, tol);
    check_values("dgamma", fused.v[2], want.dgamma, tol);
    check_values("dbeta", fused.v[3], want.dbeta, tol);
    if (with_residual) check_values("dresidual", fused.v[4], want.dres, tol);
    Outputs composed;
    {
        ComposedGuard off;
        composed = run_block<D, B>(shape, x, rp, w, gamma, beta, dt);
    }
    // The same sums in the same order but for FMA contractions: a few ulps at most.
    for (std::size_t i = 0; i < fused.v.size(); ++i)
        check_values(kNames[i], fused.v[i], composed.v[i], dt == DType::F64 ? 1e-13 : 1e-5);
}

}  // namespace

TEST_CASE(
    "cpu batch norm + relu: forward_relu and forward_add_relu match the definition and "
    "the composed ops",
    "[cpu][batchnorm][batchnorm_relu]") {
    for (const bool residual : {false, true}) {
        INFO((residual ? "forward_add_relu" : "forward_relu"));
        INFO("odd plane sizes");
        check_block<4>(Shape{3, 5, 7, 3}, residual, DType::F32, 2e-4);
        INFO("planes of 16 and more (the vector loops)");
        check_block<4>(Shape{4, 3, 8, 6}, residual, DType::F32, 2e-4);
        INFO("[N, C] as BatchNorm1d");
        check_block<2>(Shape{37, 6}, residual, DType::F32, 2e-4);
        INFO("f64 data computes in f64");
        check_block<4, AD64>(Shape{3, 4, 5, 3}, residual, DType::F64, 1e-10);
        // bf16: statistics in f32, y in bf16; with a residual declined, composed with bn(x)
        // rounded to bf16 before the addition.
        INFO("bf16 data");
        check_block<4>(Shape{4, 3, 4, 4}, residual, DType::BF16, 2e-2);
    }
}

TEST_CASE("cpu batch norm + relu: results do not depend on the thread count",
          "[cpu][batchnorm][batchnorm_relu]") {
    ThreadsGuard guard;
    const Shape shape{8, 24, 9, 9};
    const std::size_t n = shape.num_elements();
    ember::Cpu::seed(5);
    const auto x = uniform(n, -2, 3), r = uniform(n, -1, 1), w = uniform(n, -1, 1);
    const auto gamma = uniform(24, 0.5, 1.5), beta = uniform(24, -0.5, 0.5);
    for (const bool res : {false, true}) {
        ember::cpu::set_num_threads(1);
        const Outputs one = run_block<4>(shape, x, res ? &r : nullptr, w, gamma, beta, DType::F32);
        for (const std::size_t t : {2, 3, 8}) {
            ember::cpu::set_num_threads(t);
            const Outputs many =
                run_block<4>(shape, x, res ? &r : nullptr, w, gamma, beta, DType::F32);
            for (std::size_t i = 0; i < one.v.size(); ++i) {
                INFO(t << " threads, residual " << res << ", " << kNames[i]);
                CHECK(many.v[i] == one.v[i]);
            }
        }
    }
}

TEST_CASE("cpu batch norm + relu: operands are checked, f16/bf16 with a residual declined",
          "[cpu][batchnorm][batchnorm_relu][errors]") {
    using C = ember::Cpu;
    auto x = Tensor<C, 4>::zeros({2, 3, 2, 2}).into_primitive();
    auto v3 = Tensor<C, 1>::ones({3}).into_primitive();
    auto v4 = Tensor<C, 1>::ones({4}).into_primitive();
    const ember::BatchNormScalars s{1e-5, 0.1};
    CHECK_THROWS_WITH(C::float_batch_norm_relu(x, v4, v3, v3, v3, std::nullopt, s),
                      Catch::Contains("batch_norm_relu") && Catch::Contains("[4]"));
    auto r = Tensor<C, 4>::zeros({2, 3, 2, 1}).into_primitive();
    CHECK_THROWS_AS(C::float_batch_norm_relu(x, v3, v3, v3, v3, r, s), ember::ShapeError);
    CHECK_THROWS_WITH(C::float_batch_norm_relu(x, v3, v3, v3, v3, r, s),
                      Catch::Contains("residual") && Catch::Contains("[2, 3, 2, 1]"));
    auto one = Tensor<C, 2>::zeros({1, 3}).into_primitive();
    CHECK_THROWS_AS(C::float_batch_norm_relu(one, v3, v3, v3, v3, std::nullopt, s),
                    ember::ArgumentError);
    CHECK_THROWS_WITH(
        C::float_batch_norm_relu_backward(x, x, r, v3, v3, v3, false, std::nullopt),
        Catch::Contains("batch_norm_relu_backward") && Catch::Contains("[2, 3, 2, 1]"));
    // bf16 with a residual: the composed ops round bn(x) first, so the kernel declines; without
    // one it runs (the ReLU commutes with the rounding).
    auto xb = Tensor<C, 4>::ones({2, 3, 2, 2}).cast(DType::BF16).into_primitive();
    CHECK_FALSE(C::float_batch_norm_relu(xb, v3, v3, v3, v3, xb, s).has_value());
    CHECK(C::float_batch_norm_relu(xb, v3, v3, v3, v3, std::nullopt, s).has_value());
    // A residual of another dtype: declined, the composed ops promote.
    auto x64 = Tensor<C, 4>::ones({2, 3, 2, 2}).cast(DType::F64).into_primitive();
    CHECK_FALSE(C::float_batch_norm_relu(x, v3, v3, v3, v3, x64, s).has_value());
}

}  // namespace test_cpu_batch_norm
