// compile_probe: what a downstream file looks like — the umbrella header and a few ops on
// Tensor<Cpu, 2>. benchmarks/compile_time.sh times compiling it (DESIGN.md: "Compile time is a
// feature"; goal: at most 5 s at -O2).
#include <ember/ember.hpp>

#include <iostream>
#include <numbers>

int main() {
    using T = ember::Tensor<ember::Cpu, 2>;
    ember::Device<ember::Cpu> device{};
    auto x = T::random({32, 64}, ember::Distribution::Default, device);
    auto w = T::random({64, 16}, ember::Distribution::Normal(0.0, 0.1), device);
    auto a = T::from_data(ember::TensorData({1.f, 2.f, 3.f, 4.f}, {2, 2}), device);

    auto h = x.matmul(w) + 1;                                              // matmul, scalar add
    auto g = h * ((h / std::numbers::sqrt2_v<float>).erf() + 1) / 2;       // gelu, by hand
    auto p = ember::activation::softmax(g, 1);                             // softmax
    auto s = (p.sum_dim(1) - 1.0).abs().max();                             // reductions
    auto r = ember::activation::relu(a.transpose() - 2.5).exp();           // views, unary ops

    std::cout << r << '\n';
    std::cout << "max |row sum - 1| = " << s.into_scalar() << '\n';
    return 0;
}
