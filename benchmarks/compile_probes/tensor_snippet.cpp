// compile probe (a): the README's tensor snippet. Built with -DPROBE_DISPATCH on ember::Dispatch
// (ops compiled in ember_dispatch), without it on ember::Cpu (benchmarks/compile_dispatch.sh).
#if defined(PROBE_DISPATCH)
// The tensor API on Dispatch without the concrete stacks that <ember/ember.hpp> adds.
#include <ember/dispatch/tensor.hpp>
using B = ember::Dispatch;
#else
#include <ember/ember.hpp>
using B = ember::Cpu;
#endif
#include <iostream>

int main() {
    ember::Device<B> device{};
    auto a =
        ember::Tensor<B, 2>::from_data(ember::TensorData({1.f, 2.f, 3.f, 4.f}, {2, 2}), device);
    auto x = ember::Tensor<B, 2>::random({2, 2}, ember::Distribution::Default, device);
    auto t = (a + x).matmul(a).exp() * 2;
    std::cout << t << '\n';
    auto i = ember::Tensor<B, 1, ember::Int>::arange(0, 5, device);
    std::vector<float> v = a.to_data().to_vec<float>();
    return static_cast<int>(v.size() + i.dims()[0]) == 9 ? 0 : 1;
}
