// A downstream program: a few tensor ops on the CPU backend, checked against values worked out
// by hand. Exit status 0 when every check passes.
#include <ember/ember.hpp>
#include <ember/backend/cpu.hpp>
#include <ember/nn.hpp>
#include <ember/optim.hpp>

#include <cmath>
#include <filesystem>
#include <cstdlib>
#include <iostream>
#include <sstream>
#include <vector>

namespace {
int failures = 0;

void check(bool ok, const char* what) {
    if (!ok) {
        std::cerr << "consumer: FAILED: " << what << '\n';
        ++failures;
    }
}

bool near(const std::vector<float>& got, const std::vector<float>& want) {
    if (got.size() != want.size()) return false;
    for (std::size_t i = 0; i < got.size(); ++i)
        if (std::fabs(got[i] - want[i]) > 1e-4f * (1.f + std::fabs(want[i]))) return false;
    return true;
}
}  // namespace

int main() {
    using B = ember::Cpu;
    static_assert(ember::Backend<B>);
    ember::Device<B> device{};

    auto a = ember::Tensor<B, 2>::from_data(ember::TensorData({1.f, 2.f, 3.f, 4.f}, {2, 2}), device);
    auto b = ember::Tensor<B, 2>::from_data(ember::TensorData({5.f, 6.f, 7.f, 8.f}, {2, 2}), device);

    // [[1,2],[3,4]] @ [[5,6],[7,8]] = [[19,22],[43,50]]; +1, then *2.
    auto c = (a.matmul(b) + 1) * 2;
    check(near(c.to_data().to_vec<float>(), {40.f, 46.f, 88.f, 102.f}), "(a @ b + 1) * 2");
    check(c.dims() == std::array<std::size_t, 2>{2, 2}, "dims of a @ b");

    // Broadcasting a row over the rows, then a reduction: (a + [10, 20]).sum() = 10 + 60 = 70.
    auto row = ember::Tensor<B, 2>::from_data(ember::TensorData({10.f, 20.f}, {1, 2}), device);
    auto s = (a + row).sum();
    check(near(s.to_data().to_vec<float>(), {70.f}), "(a + row).sum()");

    // Display goes through operator<<.
    std::ostringstream text;
    text << c;
    check(!text.str().empty(), "operator<< prints something");

    // Errors cross the library boundary as ember::Error.
    bool threw = false;
    try {
        auto bad = ember::Tensor<B, 2>::zeros({3, 3}, device);
        (void)a.matmul(bad);
    } catch (const ember::Error&) {
        threw = true;
    }
    check(threw, "matmul of [2, 2] by [3, 3] throws ember::Error");

    // Modules, configs and records from the installed headers and library (gzip through zlib,
    // config JSON through the library's compiled code).
    {
        using AD = ember::Autodiff<B>;
        const auto dir = std::filesystem::temp_directory_path() / "ember-consumer";
        std::filesystem::create_directories(dir);
        auto config = ember::nn::LinearConfig{2, 1};
        config.save(dir / "linear.json");
        auto linear = ember::nn::LinearConfig::load(dir / "linear.json").init<AD>(device);
        // w = [[1], [2]], b = [0.5]: [1, 1] -> 3.5.
        linear.weight = linear.weight.with_value(
            ember::Tensor<AD, 2>::from_data(ember::TensorData({1.f, 2.f}, {2, 1}), device));
        linear.bias = linear.bias->with_value(ember::Tensor<AD, 1>::from_floats({0.5f}, device));
        auto x = ember::Tensor<AD, 2>::ones({1, 2}, device);
        check(near(linear.forward(x).to_data().to_vec<float>(), {3.5f}), "Linear forward");
        auto optim = ember::optim::SgdConfig{}.init<decltype(linear)>();
        auto grads = ember::optim::GradientsParams::from_grads(linear.forward(x).sum().backward(),
                                                               linear);
        linear = optim.step(0.5, linear, std::move(grads));  // w -= 0.5 * [1, 1], b -= 0.5
        check(near(linear.forward(x).to_data().to_vec<float>(), {2.0f}), "SGD step");
        ember::record::NamedMpkGzFileRecorder<> recorder;
        linear.save_file(dir / "linear", recorder);
        auto loaded = config.init<AD>(device).load_file(dir / "linear", recorder, device);
        check(loaded.weight.val().to_data() == linear.weight.val().to_data(), "record round trip");
        std::filesystem::remove_all(dir);
    }

    std::cout << c << '\n';
    if (failures != 0) {
        std::cerr << "consumer: " << failures << " check(s) failed\n";
        return EXIT_FAILURE;
    }
    std::cout << "consumer: all checks passed\n";
    return EXIT_SUCCESS;
}
