// ember::Dispatch: device strings, the stacks a build has, tensors of two stacks, to_device
// between stacks, and autodiff through Dispatch. (The shared suites run Dispatch too: see
// TestBackends in harness.hpp and AutodiffBackends in grad_check.hpp.)
#include <cstdlib>
#include <string>

#include <ember/dispatch/dispatch.hpp>
#include <ember/nn/attention.hpp>
#include <ember/nn/dropout.hpp>
#include <ember/nn/norm.hpp>

#include "harness.hpp"

namespace test_dispatch {

using ember::Dispatch;
using ember::DispatchDevice;
using ember::Tensor;
using Dev = ember::Device<Dispatch>;

namespace {
std::string error_of(const auto& f) {
    try {
        f();
    } catch (const ember::DeviceError& e) {
        return e.what();
    }
    return "(no error)";
}
bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }
}  // namespace

TEST_CASE("dispatch: device strings parse and print back", "[dispatch]") {
    CHECK(Dev::parse("cpu") == Dev::cpu());
    CHECK(Dev::parse("cpu+fusion") == Dev::cpu().fusion(true));
    CHECK(Dev::parse("cpu+autodiff+fusion") == Dev::cpu().fusion().autodiff());
    CHECK(Dev{} == Dev::cpu());
    CHECK(Dev::cpu().fusion(true).fusion(false) == Dev::cpu());
    CHECK(Dev::cuda(1).fusion().to_string() == "cuda:1+fusion");
    CHECK(Dev::vulkan(0).autodiff().to_string() == "vulkan:0+autodiff");
    CHECK(Dev::cpu().fusion().autodiff().to_string() == "cpu+fusion+autodiff");
    CHECK(Dev::cuda(2).index() == 2);
    CHECK(Dev::cuda(2).kind() == ember::DispatchKind::Cuda);
    CHECK(Dev::cuda(0) != Dev::cuda(1));
    CHECK(Dev::cuda(0) != Dev::cuda(0).fusion());
    for (const auto& b : Dispatch::backends()) {
        const std::string s = b == "cpu" ? "cpu+fusion" : b + ":3+fusion+autodiff";
        CHECK(Dev::parse(s).to_string() == s);
    }
}

TEST_CASE("dispatch: bad device strings are errors naming the string", "[dispatch]") {
    for (const char* bad : {"", "gpu", "cpu+fast", "cuda:x", "cuda:", "cpu:1", "cpu+fusion+fusion",
                            "cpu+", "vulkan:0+fusion+", "+fusion", "CPU"}) {
        INFO(bad);
        const std::string e = error_of([&] { (void)Dev::parse(bad); });
        CHECK(has(e, std::string("\"") + bad + "\""));
    }
    CHECK(has(error_of([] { (void)Dev::parse("cpu+fast"); }), "unknown decorator \"fast\""));
    CHECK(has(error_of([] { (void)Dev::parse("tpu:0"); }), "unknown backend \"tpu\""));
}

TEST_CASE("dispatch: a backend the build lacks is an error listing what it has", "[dispatch]") {
    const auto have = Dispatch::backends();
    REQUIRE(!have.empty());
    CHECK(have.front() == "cpu");
    for (const char* kind : {"vulkan", "cuda"}) {
        if (std::find(have.begin(), have.end(), kind) != have.end()) continue;
        const std::string e = error_of([&] { (void)Dev::parse(std::string(kind) + ":0"); });
        CHECK(has(e, std::string("the ") + kind + " backend, which this build lacks; it has: cpu"));
        // A device made in code fails where it is first used, with the same list.
        const auto d = std::string(kind) == "cuda" ? Dev::cuda(0) : Dev::vulkan(0);
        const std::string u = error_of([&] { (void)Tensor<Dispatch, 1>::zeros({2}, d); });
        CHECK(has(u, std::string("no ") + kind + " backend"));
        CHECK(has(u, "it has: cpu"));
    }
}

TEST_CASE("dispatch: each CPU stack computes the same values", "[dispatch]") {
    for (const char* s : {"cpu", "cpu+fusion", "cpu+autodiff", "cpu+fusion+autodiff"}) {
        INFO(s);
        const auto d = Dev::parse(s);
        auto x = Tensor<Dispatch, 1>::from_floats({1.f, -2.f, 3.f, -4.f}, d).reshape<2>({2, 2});
        auto y = (x * x + 1.0).sum_dim(1);  // [[1+4+2], [9+16+2]]
        CHECK(y.device() == d);
        CHECK(y.to_data().to_vec<float>() == std::vector<float>{7.f, 27.f});
        auto idx = x.argmax(1);  // [[0], [0]]
        CHECK(idx.device() == d.autodiff(false));  // int tensors never carry autodiff
        CHECK(idx.to_data().to_vec<std::int64_t>() == std::vector<std::int64_t>{0, 0});
        auto m = x.greater_elem(0.0);
        CHECK(m.to_data().to_vec<bool>() == std::vector<bool>{true, false, true, false});
        CHECK(x.matmul(x).to_data().to_vec<float>() == std::vector<float>{-5.f, 6.f, -9.f, 10.f});
    }
}

TEST_CASE("dispatch: tensors of two stacks in one op are an error naming both", "[dispatch]") {
    auto a = Tensor<Dispatch, 1>::from_floats({1.f, 2.f}, Dev::cpu());
    auto b = Tensor<Dispatch, 1>::from_floats({3.f, 4.f}, Dev::cpu().fusion());
    const std::string e = error_of([&] { (void)(a + b); });
    CHECK(has(e, "tensors of two stacks, cpu and cpu+fusion"));
    CHECK(has(e, "float_binary"));
    auto i = Tensor<Dispatch, 1, ember::Int>::from_ints({0, 1}, Dev::cpu().fusion());
    CHECK(has(error_of([&] { (void)a.gather(0, i); }), "cpu and cpu+fusion"));
    std::vector<Tensor<Dispatch, 1>> parts{a, b};
    CHECK(has(error_of([&] { (void)Tensor<Dispatch, 1>::cat(parts, 0); }), "cpu and cpu+fusion"));
}

TEST_CASE("dispatch: to_device moves between stacks", "[dispatch]") {
    auto a = Tensor<Dispatch, 1>::from_floats({1.f, 2.f, 3.f}, Dev::cpu());
    for (const char* s : {"cpu+fusion", "cpu+autodiff", "cpu+fusion+autodiff", "cpu"}) {
        INFO(s);
        const auto d = Dev::parse(s);
        auto b = a.to_device(d);
        CHECK(b.device() == d);
        CHECK((b * 2.0).to_data().to_vec<float>() == std::vector<float>{2.f, 4.f, 6.f});
        // Back again, and between two decorated stacks.
        CHECK(b.to_device(Dev::cpu()).device() == Dev::cpu());
        CHECK(b.to_device(Dev::cpu().fusion().autodiff()).to_data().to_vec<float>() ==
              std::vector<float>{1.f, 2.f, 3.f});
    }
    auto i = Tensor<Dispatch, 1, ember::Int>::from_ints({4, 5}, Dev::cpu());
    auto j = i.to_device(Dev::cpu().fusion().autodiff());
    CHECK(j.device() == Dev::cpu().fusion());
    CHECK(j.to_data().to_vec<std::int64_t>() == std::vector<std::int64_t>{4, 5});
    auto m = i.greater_elem(4).to_device(Dev::cpu().fusion());
    CHECK(m.to_data().to_vec<bool>() == std::vector<bool>{false, true});
    // A moved tensor works with the tensors of its new stack.
    auto f = Tensor<Dispatch, 1>::from_floats({1.f, 1.f}, Dev::cpu().fusion());
    CHECK((f + a.slice({{0, 2}}).to_device(Dev::cpu().fusion())).to_data().to_vec<float>() ==
          std::vector<float>{2.f, 3.f});
}

TEST_CASE("dispatch: autodiff through Dispatch", "[dispatch]") {
    for (const char* s : {"cpu+autodiff", "cpu+fusion+autodiff"}) {
        INFO(s);
        const auto d = Dev::parse(s);
        auto w = Tensor<Dispatch, 1>::from_floats({1.f, -2.f, 3.f}, d).require_grad();
        CHECK(w.is_require_grad());
        // L = sum(w·w·c) with c a constant made without autodiff: dL/dw = 2·w·c.
        auto c = Tensor<Dispatch, 1>::from_floats({1.f, 2.f, 0.5f}, d.autodiff(false));
        auto grads = (w * w * c).sum().backward();
        auto g = w.grad(grads);
        REQUIRE(g.has_value());
        CHECK(g->device() == d.autodiff(false));
        CHECK(g->to_data().to_vec<float>() == std::vector<float>{2.f, -8.f, 3.f});
        // grad_remove takes it out; grad_replace puts one back.
        auto removed = w.grad_remove(grads);
        REQUIRE(removed.has_value());
        CHECK_FALSE(w.grad(grads).has_value());
        w.grad_replace(grads, *removed * 2.0);
        CHECK(w.grad(grads)->to_data().to_vec<float>() == std::vector<float>{4.f, -16.f, 6.f});
        // detach and inner leave the graph.
        CHECK_FALSE(w.detach().is_require_grad());
        CHECK(w.inner().device() == d.autodiff(false));
        CHECK(Tensor<Dispatch, 1>::from_inner(w.inner()).device() == d);
    }
    // Without autodiff: no gradients, and backward says which device to use.
    auto x = Tensor<Dispatch, 1>::from_floats({1.f}, Dev::cpu()).require_grad();
    CHECK_FALSE(x.is_require_grad());
    const std::string e = error_of([&] { (void)x.sum().backward(); });
    CHECK(has(e, "no autodiff (make it on cpu+autodiff)"));
}

TEST_CASE("dispatch: a default-made tensor and stacks across ops", "[dispatch]") {
    CHECK(Dispatch::name() == "dispatch");
    Tensor<Dispatch, 1> t = Tensor<Dispatch, 1>::zeros({3});
    CHECK(t.device() == Dev::cpu());
    Dispatch::seed(7);
    auto r1 = Tensor<Dispatch, 1>::random({4}, ember::Distribution::Default).to_data();
    Dispatch::seed(7);
    auto r2 = Tensor<Dispatch, 1>::random({4}, ember::Distribution::Default).to_data();
    CHECK(r1.to_vec<float>() == r2.to_vec<float>());
    Dispatch::sync(Dev::cpu().fusion());
}

TEST_CASE("dispatch: an lvalue operand is lent to the op, not counted", "[dispatch]") {
    // The tensor layer lends an lvalue tensor's handle to an op (no count update); the op must
    // then leave that tensor as it was: values, and the count of its handle.
    const auto refs = [](const auto& t) { return t.primitive().handle->refs.load(); };
    for (const Dev d : {Dev::cpu(), Dev::cpu().fusion(), Dev::cpu().autodiff()}) {
        CAPTURE(d.to_string());
        auto x = Tensor<Dispatch, 1>::from_data(ember::TensorData({1.f, 2.f, 3.f}, {3}), d);
        auto y = Tensor<Dispatch, 1>::from_data(ember::TensorData({4.f, 5.f, 6.f}, {3}), d);
        SECTION("binary ops, unary ops and reductions on lvalues") {
            auto z = ((x + y) * y).exp().sum_dim(0);
            CHECK(z.to_data().to_vec<float>()[0] ==
                  Approx(std::exp(20.f) + std::exp(35.f) + std::exp(54.f)).epsilon(1e-6));
            CHECK(x.exp().to_data().to_vec<float>()[2] == Approx(std::exp(3.f)));
            CHECK(x.mul(x).to_data().to_vec<float>() == std::vector<float>{1, 4, 9});
            CHECK(x.to_data().to_vec<float>() == std::vector<float>{1, 2, 3});
            CHECK(y.to_data().to_vec<float>() == std::vector<float>{4, 5, 6});
            CHECK(refs(x) == 1);
            CHECK(refs(y) == 1);
        }
        SECTION("a tensor taken and lent in one op") {
            // std::move(x).add(x): the tensor cannot lend what the op takes over.
            auto z = std::move(x).add(x);
            CHECK(z.to_data().to_vec<float>() == std::vector<float>{2, 4, 6});
            auto m =
                Tensor<Dispatch, 2>::from_data(ember::TensorData({1.f, 2.f, 3.f, 4.f}, {2, 2}), d);
            auto p = std::move(m).matmul(m);
            CHECK(p.to_data().to_vec<float>() == std::vector<float>{7, 10, 15, 22});
        }
        SECTION("a copy of a tensor and an operand sharing its handle") {
            auto c = x;  // x's handle now has two names
            CHECK(refs(x) == 2);
            auto z = std::move(c).add(x);  // takes c's name: not the only one, so x is untouched
            CHECK(z.to_data().to_vec<float>() == std::vector<float>{2, 4, 6});
            CHECK(x.to_data().to_vec<float>() == std::vector<float>{1, 2, 3});
            CHECK(refs(x) == 1);
        }
    }
    SECTION("copies and moves of a lent name count") {
        auto x = Tensor<Dispatch, 1>::from_data(ember::TensorData({1.f}, {1}), Dev::cpu());
        const ember::DispatchTensor& h = x.primitive();
        {
            ember::DispatchTensor lent = ember::DispatchTensor::lend(h);
            CHECK(lent.lent);
            CHECK_FALSE(lent.unique());
            CHECK(refs(x) == 1);
            ember::DispatchTensor copy = lent;
            CHECK_FALSE(copy.lent);
            CHECK(refs(x) == 2);
            ember::DispatchTensor moved = std::move(lent);
            CHECK_FALSE(moved.lent);
            CHECK(refs(x) == 3);
        }
        CHECK(refs(x) == 1);
    }
}

TEST_CASE("dispatch: training-only layers train only on an autodiff device", "[dispatch]") {
    // Dropout with p = 1 zeroes everything while training and passes the input through in
    // inference; on Dispatch, "training" is the device's autodiff switch (Dispatch::ad_enabled).
    const ember::nn::Dropout drop{1.0};
    for (const char* s : {"cpu", "cpu+fusion", "cpu+autodiff", "cpu+fusion+autodiff"}) {
        INFO(s);
        const auto d = Dev::parse(s);
        CHECK(ember::ad_enabled<Dispatch>(d) == d.has_autodiff());
        auto x = Tensor<Dispatch, 1>::from_floats({1.f, 2.f}, d);
        const std::vector<float> want =
            d.has_autodiff() ? std::vector<float>{0.f, 0.f} : std::vector<float>{1.f, 2.f};
        CHECK(drop.forward(x).to_data().to_vec<float>() == want);
    }
    CHECK(ember::ad_enabled<ember::Autodiff<ember::Cpu>>({}));
    CHECK_FALSE(ember::ad_enabled<ember::Cpu>({}));
}

TEST_CASE("dispatch: batch norm uses batch statistics only on an autodiff device", "[dispatch]") {
    // Input [2, 1]: values 1 and 3. Running statistics (mean 0, variance 1) give x / sqrt(1 + eps);
    // batch statistics (mean 2, biased variance 1) give (x - 2) / sqrt(1 + eps).
    const double eps = 1e-5;
    const float k = static_cast<float>(1.0 / std::sqrt(1.0 + eps));
    auto check = [&]<typename B>(const ember::Device<B>& d, bool training) {
        auto bn = ember::nn::BatchNormConfig{1, eps}.init<B>(d);
        auto x = Tensor<B, 1>::from_floats({1.f, 3.f}, d).template reshape<2>({2, 1});
        const auto y = bn.forward(x).to_data().template to_vec<float>();
        const std::vector<float> want = training ? std::vector<float>{-k, k}
                                                 : std::vector<float>{1.f * k, 3.f * k};
        REQUIRE(y.size() == 2);
        CHECK(y[0] == Approx(want[0]).epsilon(1e-6));
        CHECK(y[1] == Approx(want[1]).epsilon(1e-6));
    };
    check.operator()<Dispatch>(Dev::cpu(), false);
    check.operator()<Dispatch>(Dev::cpu().autodiff(), true);
    check.operator()<ember::Cpu>({}, false);
    check.operator()<ember::Autodiff<ember::Cpu>>({}, true);
}

TEST_CASE("dispatch: the GPU stacks this build has compute what the CPU does", "[dispatch]") {
    std::vector<DispatchDevice> gpus;
#if defined(EMBER_VULKAN)
    if (ember::vulkan::is_available())
        for (const char* s : {"vulkan:0", "vulkan:0+fusion", "vulkan:0+fusion+autodiff"})
            gpus.push_back(Dev::parse(s));
#endif
#if defined(EMBER_CUDA)
    if (ember::cuda::is_available())
        for (const char* s : {"cuda:0", "cuda:0+fusion", "cuda:0+fusion+autodiff"})
            gpus.push_back(Dev::parse(s));
#endif
    if (gpus.empty()) {
        WARN("skipped: no GPU stack can run here");
        return;
    }
    for (const auto& d : gpus) {
        INFO(d.to_string());
        auto x = Tensor<Dispatch, 1>::from_floats({1.f, -2.f, 3.f, -4.f}, Dev::cpu());
        auto g = x.to_device(d).reshape<2>({2, 2}).require_grad();
        CHECK(g.device() == d);
        auto y = (g * g + 1.0).sum_dim(1);
        CHECK(y.to_device(Dev::cpu()).to_data().to_vec<float>() == std::vector<float>{7.f, 27.f});
        CHECK(g.matmul(g).to_data().to_vec<float>() == std::vector<float>{-5.f, 6.f, -9.f, 10.f});
        CHECK(has(error_of([&] { (void)(g.reshape<1>({4}) + x); }), "tensors of two stacks"));
        if (d.has_autodiff()) {
            auto grads = y.sum().backward();
            CHECK(g.grad(grads)->to_data().to_vec<float>() ==
                  std::vector<float>{2.f, -4.f, 6.f, -8.f});
        }
    }
}

TEST_CASE("dispatch: attention runs the fused kernel of the operands' stack", "[dispatch]") {
    using Kernel = ember::AttentionKernel<Dispatch>;
    // [1, 2, 5, 32]: head dim 32 is one the CUDA kernel takes. With q = 0 every logit is 0, so
    // under the causal mask query i attends to keys 0..i with weight 1 / (i + 1): its output is
    // the mean of v's first i + 1 rows, and d sum(out) / d v[j] = sum over i >= j of 1 / (i + 1).
    const std::size_t heads = 2, len = 5, dim = 32;
    std::vector<float> vs(heads * len * dim);
    for (std::size_t i = 0; i < vs.size(); ++i) vs[i] = static_cast<float>((i * 7) % 11) - 5.f;
    std::vector<float> want(vs.size()), want_dv(vs.size());
    for (std::size_t h = 0; h < heads; ++h)
        for (std::size_t i = 0; i < len; ++i)
            for (std::size_t e = 0; e < dim; ++e) {
                double sum = 0, dv = 0;
                for (std::size_t j = 0; j <= i; ++j) sum += vs[(h * len + j) * dim + e];
                for (std::size_t r = i; r < len; ++r) dv += 1.0 / static_cast<double>(r + 1);
                want[(h * len + i) * dim + e] =
                    static_cast<float>(sum / static_cast<double>(i + 1));
                want_dv[(h * len + i) * dim + e] = static_cast<float>(dv);
            }
    std::vector<DispatchDevice> stacks{Dev::cpu(), Dev::cpu().autodiff()};
#if defined(EMBER_CUDA)
    if (ember::cuda::is_available())
        for (const char* s : {"cuda:0", "cuda:0+autodiff", "cuda:0+fusion+autodiff"})
            stacks.push_back(Dev::parse(s));
#endif
    for (const auto& d : stacks) {
        INFO(d.to_string());
        const ember::Shape shape{1, heads, len, dim};
        auto q = Tensor<Dispatch, 4>::zeros(shape, d);
        auto v = Tensor<Dispatch, 4>::from_data(ember::TensorData(vs, shape), d).require_grad();
        // CUDA's stacks have the kernel, and the CPU's without Fusion (f32 and no mask: the
        // CPU's fused attention, unless EMBER_CPU_ATTENTION=0 turns it off).
        const char* off = std::getenv("EMBER_CPU_ATTENTION");
        const bool cpu_on = !(off && std::string(off) == "0");
        const bool fused = d.kind() == ember::DispatchKind::Cuda || cpu_on;
        CHECK(Kernel::supports(q.primitive(), q.primitive(), v.primitive(), std::nullopt,
                               std::nullopt) == fused);
        ember::AttentionOptions o;
        o.causal = true;
        auto out = ember::module::attention(q, q, v, o);
        const auto got = out.to_device(Dev::cpu()).to_data().template to_vec<float>();
        REQUIRE(got.size() == want.size());
        for (std::size_t i = 0; i < got.size(); ++i) CHECK(got[i] == Approx(want[i]).margin(1e-5));
        if (d.has_autodiff()) {
            auto grads = out.sum().backward();
            const auto dv = v.grad(grads)->to_device(Dev::cpu()).to_data().to_vec<float>();
            REQUIRE(dv.size() == want_dv.size());
            for (std::size_t i = 0; i < dv.size(); ++i)
                CHECK(dv[i] == Approx(want_dv[i]).margin(1e-5));
        }
    }
    // A stack that cannot run the kernel (Fusion<Cpu> composes attention) is refused by forward
    // with the stack's name.
    const auto c = Tensor<Dispatch, 4>::zeros(ember::Shape{1, 1, 2, 32}, Dev::cpu().fusion());
    CHECK(has(error_of([&] {
                  (void)Kernel::forward(c.primitive(), c.primitive(), c.primitive(), std::nullopt,
                                        std::nullopt, false, 1.0);
              }),
              "cpu+fusion has no fused attention kernel"));
}

}  // namespace test_dispatch
