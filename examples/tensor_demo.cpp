// A first look at ember's tensor API on the CPU backend.
#include <ember/ember.hpp>
#include <iostream>

#include "cli.hpp"

int main(int argc, char** argv) {
    CLI::App app{"A first look at ember's tensor API on the CPU backend (no options).",
                 "tensor_demo"};
    ember_examples::setup(app);
    ember_examples::parse_or_exit(app, argc, argv);

    using B = ember::Cpu;
    ember::Device<B> device{};
    B::seed(42);
    auto a = ember::Tensor<B, 2>::from_data(ember::TensorData({1.f, 2.f, 3.f, 4.f}, {2, 2}), device);
    auto x = ember::Tensor<B, 2>::random({2, 3}, ember::Distribution::Default, device);
    std::cout << "a =\n" << a << "\n";
    std::cout << "a @ a + 1 =\n" << a.matmul(a) + 1 << "\n";
    std::cout << "softmax(x, 1) =\n" << ember::activation::softmax(x, 1) << "\n";
    auto i = ember::Tensor<B, 1, ember::Int>::arange(0, 5, device);
    std::cout << "arange(0, 5) * 2 =\n" << i * 2 << "\n";
    std::cout << "sum of a = " << a.sum().into_scalar() << "\n";
    try {
        auto bad = a.matmul(x.transpose());
        (void)bad;
    } catch (const ember::ShapeError& e) {
        std::cout << "errors name the op and the shapes: " << e.what() << "\n";
    }
    return 0;
}
