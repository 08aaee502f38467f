// The custom-kernel example: the same op on the CPU's own kernel, on the reference through
// Fusion<Cpu>, and differentiated through Autodiff<Cpu>.
#include <iostream>

#include "../cli.hpp"
#include "fused_matmul_add_relu.hpp"

int main(int argc, char** argv) {
    CLI::App app{
        "One op on the CPU backend's own kernel, on the reference through Fusion<Cpu>, "
        "and differentiated through Autodiff<Cpu> (no options).",
        "custom-kernel"};
    ember_examples::setup(app);
    ember_examples::parse_or_exit(app, argc, argv);

    using ember::Tensor;
    auto lhs = Tensor<ember::Cpu, 3>::random({2, 4, 3}, ember::Distribution::Normal(0, 1));
    auto rhs = Tensor<ember::Cpu, 3>::random({2, 3, 5}, ember::Distribution::Normal(0, 1));
    auto bias = Tensor<ember::Cpu, 3>::random({1, 1, 5}, ember::Distribution::Normal(0, 1));

    auto own = custom::fused_matmul_add_relu(lhs, rhs, bias);  // the CPU's kernel
    std::cout << "Cpu (own kernel):\n" << own << "\n";

    using F = ember::Fusion<ember::Cpu>;
    auto to_f = [](const Tensor<ember::Cpu, 3>& t) { return Tensor<F, 3>::from_data(t.to_data()); };
    ember::fusion::reset_stats();
    auto fused = custom::fused_matmul_add_relu(to_f(lhs), to_f(rhs), to_f(bias));
    std::cout << "Fusion<Cpu> (reference; add + relu fused): max difference "
              << (fused.to_data().to_vec<float>() == own.to_data().to_vec<float>() ? "0" : "> 0")
              << ", kernels " << ember::fusion::stats().kernels_launched << "\n";

    using A = ember::Autodiff<ember::Cpu>;
    auto w = Tensor<A, 3>::from_data(rhs.to_data()).require_grad();
    auto loss = custom::fused_matmul_add_relu(Tensor<A, 3>::from_data(lhs.to_data()), w,
                                              Tensor<A, 3>::from_data(bias.to_data()))
                    .sum();
    auto grads = loss.backward();
    std::cout << "d(sum)/d(rhs) through Autodiff<Cpu>:\n" << *w.grad(grads) << "\n";
}
