// The in-place Adam kernel of the Vulkan backend (shaders/adam.comp), which captured steps
// need (their update must write parameters in place) and the eager path uses too. The
// captured-step suite itself runs on every GPU backend: test_graph.cpp. Compiled only with the
// Vulkan backend; skipped without a device (CI runs it on lavapipe).
#if defined(EMBER_VULKAN)
#include <array>
#include <cmath>
#include <vector>

#include <ember/stacks.hpp>

#include "harness.hpp"

namespace test_vulkan_adam {

namespace {
using ember::Tensor;
using ember::Vulkan;
}  // namespace

// The in-place Adam kernel the captured steps need (shaders/adam.comp), also the eager path:
// against the update written out element by element in double (the formula in adam.hpp).
TEST_CASE("vulkan: the fused Adam step follows the formula", "[vulkan][graph][optim]") {
    if (!ember::vulkan::is_available()) {
        WARN("skipped: no Vulkan device");
        return;
    }
    using T2 = Tensor<Vulkan, 2>;
    const ember::AdamStepScalars s{0.9, 0.999, 1e-8, 0.01, 1 - 0.9 * 0.9, 1 - 0.999 * 0.999};
    Vulkan::seed(7);
    const T2 p = T2::random({6, 5}, ember::Distribution::Normal(0, 1));
    const T2 g = T2::random({6, 5}, ember::Distribution::Normal(0, 1));
    const T2 m = T2::random({6, 5}, ember::Distribution::Normal(0, 0.1));
    const T2 v = T2::random({6, 5}, ember::Distribution::Uniform(0, 0.1));
    auto vec = [](const T2& t) { return t.to_data().convert(ember::DType::F64).to_vec<double>(); };
    const auto pv = vec(p), gv = vec(g), mv = vec(m), vv = vec(v);
    std::vector<double> p_ref(pv.size()), m_ref(pv.size()), v_ref(pv.size());
    for (std::size_t k = 0; k < pv.size(); ++k) {
        m_ref[k] = s.beta_1 * mv[k] + (1 - s.beta_1) * gv[k];
        v_ref[k] = s.beta_2 * vv[k] + (1 - s.beta_2) * gv[k] * gv[k];
        p_ref[k] = pv[k] - s.lr * (m_ref[k] / s.correction_1) /
                               (std::sqrt(v_ref[k] / s.correction_2) + s.epsilon);
    }
    auto check = [&](const std::array<ember::detail::vk::VulkanTensor, 3>& out, bool transposed) {
        const std::vector<double>* refs[] = {&p_ref, &m_ref, &v_ref};
        for (int i = 0; i < 3; ++i) {
            INFO("output " << i);
            T2 t = T2::from_primitive(out[i]);
            if (transposed) t = t.transpose();
            ember::test::check_close(t.to_data(), ember::TensorData(*refs[i], ember::Shape{6, 5}),
                                     ember::Tolerance{1e-6, 1e-5});
        }
    };
    SECTION("shared inputs are left as they were") {
        check(Vulkan::float_adam_step(p.into_primitive(), g.into_primitive(), m.into_primitive(),
                                      v.into_primitive(), s),
              false);
        CHECK(vec(p) == pv);
        CHECK(vec(m) == mv);
    }
    SECTION("a parameter nothing else holds is updated in place") {
        T2 own = T2::from_data(p.to_data());
        const auto buffer = own.into_primitive().buffer.get();
        auto out = Vulkan::float_adam_step(std::move(own).into_primitive(), g.into_primitive(),
                                           m.into_primitive(), v.into_primitive(), s);
        CHECK(out[0].buffer.get() == buffer);
        check(out, false);
    }
    SECTION("strided views") {
        auto tr = [](const T2& t) { return t.transpose().into_primitive(); };
        check(Vulkan::float_adam_step(tr(p), tr(g), tr(m), tr(v), s), true);
    }
    SECTION("operands of different shapes") {
        const T2 small = T2::zeros({6, 4});
        CHECK_THROWS_AS(Vulkan::float_adam_step(p.into_primitive(), small.into_primitive(),
                                                m.into_primitive(), v.into_primitive(), s),
                        ember::ShapeError);
    }
}

}  // namespace test_vulkan_adam

#endif  // EMBER_VULKAN
