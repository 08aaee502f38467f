// A downstream program on ember::Dispatch, built through the installed package only
// (find_package(Ember COMPONENTS Dispatch), linking ember::dispatch): the device comes from a
// string at run time, a linear layer's gradient is checked against the one worked out by hand,
// one Adam step moves the weights, and the errors a user meets first (a malformed device string,
// tensors of two stacks in one op) are ember::DeviceErrors. Exit status 0 when every check passes.
#include <ember/dispatch/dispatch.hpp>
#include <ember/ember.hpp>
#include <ember/nn.hpp>
#include <ember/optim.hpp>

#include <cmath>
#include <iostream>
#include <string>
#include <vector>

namespace {
int failures = 0;

void check(bool ok, const char* what) {
    if (!ok) {
        std::cerr << "consumer_dispatch: FAILED: " << what << '\n';
        ++failures;
    }
}

template <typename F>
std::string device_error_of(F&& f) {
    try {
        f();
    } catch (const ember::DeviceError& e) {
        return e.what();
    }
    return {};
}
}  // namespace

int main(int argc, char** argv) {
    using B = ember::Dispatch;
    using T = ember::Tensor<B, 2>;
    const auto device = ember::DispatchDevice::parse(argc > 1 ? argv[1] : "cpu+autodiff");
    check(device.has_autodiff(), "the device string's +autodiff");
    check(device.to_string() == (argc > 1 ? std::string(argv[1]) : "cpu+autodiff"),
          "to_string() gives the device string back");

    // y = x·W + b (W is [inputs, outputs]) with W = [[1, 3], [2, 4]], b = [0.5, -0.5] and
    // x = [[1, 1]]: y = [3.5, 6.5]. For L = sum(y), dL/dW = xᵀ·[1, 1] = all ones, dL/db = [1, 1].
    ember::nn::Linear<B> linear = ember::nn::LinearConfig{2, 2}.init<B>(device);
    linear.weight = ember::Param<T>(
        T::from_data(ember::TensorData(std::vector<float>{1, 3, 2, 4}, {2, 2}), device));
    // (row-major: W[0] = [1, 3], W[1] = [2, 4])
    linear.bias =
        ember::Param<ember::Tensor<B, 1>>(ember::Tensor<B, 1>::from_floats({0.5f, -0.5f}, device));
    const T x = T::from_data(ember::TensorData(std::vector<float>{1, 1}, {1, 2}), device);
    const auto y = linear.forward(x);
    check(y.to_data().to_vec<float>() == std::vector<float>{3.5f, 6.5f}, "Linear forward");
    auto grads = y.sum().backward();
    const auto gw = linear.weight.val().grad(grads);
    const auto gb = linear.bias->val().grad(grads);
    check(gw && gw->to_data().to_vec<float>() == std::vector<float>{1, 1, 1, 1}, "dL/dW");
    check(gb && gb->to_data().to_vec<float>() == std::vector<float>{1, 1}, "dL/db");

    // One Adam step (lr 0.1): the first step moves every weight by lr against its gradient's
    // sign (m̂ / (√v̂ + ε) = 1 for a constant gradient).
    auto optim = ember::optim::AdamConfig{}.init<ember::nn::Linear<B>>();
    auto stepped = optim.step(0.1, linear,
                              ember::optim::GradientsParams::from_grads(std::move(grads), linear));
    const auto w = stepped.weight.val().to_data().to_vec<float>();
    const std::vector<float> want{0.9f, 2.9f, 1.9f, 3.9f};
    bool near = w.size() == want.size();
    for (std::size_t i = 0; near && i < w.size(); ++i) near = std::fabs(w[i] - want[i]) < 1e-5f;
    check(near, "one Adam step");

    // The errors: a malformed string names itself; two stacks in one op name both.
    check(device_error_of([] {
              (void)ember::DispatchDevice::parse("cpu+fast");
          }).find("\"cpu+fast\"") != std::string::npos,
          "a malformed device string is a DeviceError naming it");
    const auto a = ember::Tensor<B, 1>::from_floats({1.f}, ember::DispatchDevice::cpu());
    const auto f = ember::Tensor<B, 1>::from_floats({1.f}, ember::DispatchDevice::cpu().fusion());
    check(device_error_of([&] { (void)(a + f); }).find("cpu+fusion") != std::string::npos,
          "tensors of two stacks are a DeviceError naming both");

    std::cout << "consumer_dispatch on " << device.to_string() << " ("
              << ember::Dispatch::backends().size()
              << " backend(s) in this build): " << (failures ? "FAILED" : "ok") << '\n';
    return failures ? 1 : 0;
}
