// Quantized layers and modules against PyTorch (tests/fixtures/gen_quant.py): the CPU's int8
// Linear on every kernel the processor has and the composed default against the exact integer
// result of PyTorch's quantized values (and, loosely, torch.ao's dynamic quantized Linear);
// quantize_weights, static and dynamic activations, records at 8 bits, the Dequantize mapper.
#include <ember/nn.hpp>
#include <ember/record.hpp>

#include <filesystem>

#include "harness.hpp"

namespace test_quant_module {

using namespace ember;
using ember::test::check_close;
using ember::test::check_equal;
using ember::test::Fixture;
using quant::ActivationMode;
using quant::QuantizationScheme;

namespace {

template <Backend B>
struct TwoLayers {
    nn::Linear<B> first;
    nn::Linear<B> second;
    EMBER_MODULE(TwoLayers, first, second)
    Tensor<B, 2> forward(const Tensor<B, 2>& x) const {
        return second.forward(activation::relu(first.forward(x)));
    }
};

template <Backend B>
nn::Linear<B> linear_of(const Fixture& f) {
    return {Param<Tensor<B, 2>>(f.named_tensor<B, 2>("weight")),
            Param<Tensor<B, 1>>(f.named_tensor<B, 1>("bias"))};
}

// PyTorch's dynamic Linear quantizes activations its own way (onednn here): within 3% of the
// output's range of the exact integer result.
void check_near_torch(const TensorData& actual, const TensorData& torch) {
    double range = 0;
    for (double v : torch.to_vec<double>()) range = std::max(range, std::abs(v));
    check_close(actual, torch, {0.03 * range, 0.0});
}

std::filesystem::path temp_path(const std::string& name) {
    return std::filesystem::temp_directory_path() / ("ember_quant_" + name);
}

}  // namespace

TEST_CASE("int8 Linear equals PyTorch's quantized values multiplied exactly, on every kernel",
          "[quant]") {
    using B = Cpu;
    for (const char* name : {"linear_small", "linear_wide"}) {
        INFO(name);
        Fixture f("quant", name);
        auto x = f.named_tensor<B, 2>("input");
        auto w = f.named_tensor<B, 2>("weight").quantize_dynamic(
            QuantizationScheme::per_channel_symmetric(1));
        auto bias = f.named_tensor<B, 1>("bias");
        const quant::ActivationQuantization dynamic{};
        for (const char* kernel : {"avx512vnni", "avxvnni", "portable"}) {
            if (!cpu::set_qgemm_kernel(kernel)) continue;  // the processor lacks it
            INFO(kernel);
            Tensor<B, 2> y(B::q_linear(x.primitive(), w.primitive(), bias.primitive(), dynamic));
            check_close(y.to_data(), f.named("exact"), {1e-5, 1e-5});
            check_near_torch(y.to_data(), f.named("torch_dynamic"));
        }
        cpu::set_qgemm_kernel("auto");
        // The composed default every backend inherits gives the same.
        Tensor<B, 2> d(BackendBase<B>::q_linear(x.primitive(), w.primitive(),
                                                std::optional(bias.primitive()), dynamic));
        check_close(d.to_data(), f.named("exact"), {1e-5, 1e-5});
    }
}

TEST_CASE("quantize_weights: int8 Linear layers with dynamic, static and float activations",
          "[quant]") {
    using B = Cpu;
    Fixture f("quant", "linear_wide");
    auto lin = linear_of<B>(f);
    auto x = f.named_tensor<B, 2>("input");
    auto q = lin.quantize_weights(quant::Quantizer<>{});
    REQUIRE(q.weight.quantized());
    CHECK_FALSE(q.bias->quantized());  // biases stay float
    CHECK(q.weight.quantized()->weight.scheme() == QuantizationScheme::per_channel_symmetric(1));
    check_close(q.forward(x).to_data(), f.named("exact"), {1e-5, 1e-5});
    // A rank-3 input flattens its leading dims.
    auto x3 = x.reshape<3>({1, 5, 70});
    check_close(q.forward(x3).reshape<2>({5, 37}).to_data(), f.named("exact"), {1e-5, 1e-5});

    // Static activations: ranges observed on this batch give the parameters dynamic mode uses.
    auto observed = quant::observe_activations(q);
    CHECK_THROWS_AS(quant::freeze_activations(observed), ArgumentError);  // no batch yet
    (void)observed.forward(x);
    auto fixed = quant::freeze_activations(observed);
    const auto& act = fixed.weight.quantized()->activation;
    CHECK(act.mode == ActivationMode::Static);
    auto xq = x.quantize_dynamic(QuantizationScheme::per_tensor_affine());
    CHECK(act.scale == xq.qparams().scale.into_scalar());
    CHECK(act.offset == xq.qparams().offset->into_scalar());
    check_close(fixed.forward(x).to_data(), f.named("exact"), {1e-5, 1e-5});

    // Float activations: the dequantized weight in a float Linear.
    auto fl = quant::with_activations(q, ActivationMode::Float);
    auto wd = q.weight.quantized()->weight.dequantize();
    check_close(fl.forward(x).to_data(),
                module::linear(x, wd, std::optional(lin.bias->val())).to_data(), {1e-6, 1e-5});
    CHECK_THROWS_AS(quant::with_activations(q, ActivationMode::Static), ArgumentError);

    // The Dequantize mapper: float, trainable parameters holding the dequantized values.
    auto back = q.map(quant::Dequantize{});
    CHECK_FALSE(back.weight.quantized());
    CHECK(back.weight.is_require_grad());
    check_close(back.weight.val().to_data(), wd.to_data(), {0, 0});
    check_close(back.forward(x).to_data(), fl.forward(x).to_data(), {1e-6, 1e-5});
    // Other schemes: per-tensor affine weights also run in integers.
    auto pt = lin.quantize_weights(quant::Quantizer<>{{}, QuantizationScheme::per_tensor_affine()});
    auto wpt = lin.weight.val().quantize_dynamic(QuantizationScheme::per_tensor_affine());
    auto expect = xq.matmul(wpt) + lin.bias->val().reshape<2>({1, 37});
    check_close(pt.forward(x).to_data(), expect.to_data(), {1e-5, 1e-5});
}

TEST_CASE("quantized records: 8-bit weights, about 4x smaller, loaded back exactly", "[quant]") {
    using B = Cpu;
    const auto rec = record::NamedMpkFileRecorder<record::FullPrecisionSettings>{};
    TwoLayers<B> model{nn::LinearConfig{256, 128}.init<B>(), nn::LinearConfig{128, 10}.init<B>()};
    auto q = model.quantize_weights(quant::Quantizer<>{});
    auto x = Tensor<B, 2>::random({3, 256}, Distribution::Default);
    const auto fpath = temp_path("f32"), qpath = temp_path("int8");
    model.save_file(fpath, rec);
    q.save_file(qpath, rec);
    const double ratio = double(std::filesystem::file_size(fpath.string() + ".mpk")) /
                         double(std::filesystem::file_size(qpath.string() + ".mpk"));
    CHECK(ratio > 3.5);
    // Loaded over a freshly initialised float model: quantized again, the same values exactly.
    TwoLayers<B> fresh{nn::LinearConfig{256, 128}.init<B>(), nn::LinearConfig{128, 10}.init<B>()};
    auto loaded = fresh.load_file(qpath, rec, Device<B>{});
    REQUIRE(loaded.first.weight.quantized());
    check_equal(loaded.first.weight.quantized()->weight.to_data(),
                q.first.weight.quantized()->weight.to_data());
    check_close(loaded.first.weight.quantized()->weight.qparams().scale.to_data(),
                q.first.weight.quantized()->weight.qparams().scale.to_data(), {0, 0});
    CHECK(loaded.first.weight.id() == q.first.weight.id());
    check_close(loaded.forward(x).to_data(), q.forward(x).to_data(), {0, 0});
    // Static activation parameters travel too.
    auto observed = quant::observe_activations(q);
    (void)observed.forward(x);
    auto fixed = quant::freeze_activations(observed);
    fixed.save_file(qpath, rec);
    auto loaded_static = fresh.load_file(qpath, rec, Device<B>{});
    CHECK(loaded_static.second.weight.quantized()->activation ==
          fixed.second.weight.quantized()->activation);
    check_close(loaded_static.forward(x).to_data(), fixed.forward(x).to_data(), {0, 0});
    std::filesystem::remove(fpath.string() + ".mpk");
    std::filesystem::remove(qpath.string() + ".mpk");
}

TEST_CASE("quantized records that do not fit name the parameter", "[quant][errors]") {
    using B = Cpu;
    auto lin = nn::LinearConfig{8, 4}.init<B>();
    auto good = lin.quantize_weights(quant::Quantizer<>{}).into_record();
    auto edit = [&](auto&& f) {
        record::Value v = good;
        auto& w = v.variant();
        f(std::get<record::Map>(std::get<record::Map>(w)[0].second.variant()));
        return v;
    };
    auto field = [](record::Map& m, const char* key) -> record::Value& {
        for (auto& [k, val] : m)
            if (k == key) return val;
        throw std::runtime_error("no field");
    };
    auto msg = [&](const record::Value& v) {
        try {
            (void)lin.load_record(v);
        } catch (const Error& e) {
            return std::string(e.what());
        }
        return std::string("no error");
    };
    // An unknown mode.
    auto bad_mode = edit([&](record::Map& m) {
        std::get<record::Map>(field(m, "quant").variant())[0].second = std::string("PerBlock");
    });
    CHECK_THROWS_AS(lin.load_record(bad_mode), FormatError);
    CHECK_THAT(msg(bad_mode), Catch::Contains("weight.quant") && Catch::Contains("PerBlock"));
    // Integer scales.
    auto int_scale = edit([&](record::Map& m) {
        std::get<record::Map>(field(m, "quant").variant())[2].second =
            TensorData({1, 2, 3, 4}, {4});
    });
    CHECK_THROWS_AS(lin.load_record(int_scale), DTypeError);
    // Values of another shape than the module's.
    auto other_shape = edit([&](record::Map& m) {
        field(m, "param") = TensorData(std::vector<std::uint8_t>(12, 0), {3, 4});
    });
    CHECK_THAT(msg(other_shape), Catch::Contains("weight") && Catch::Contains("[3, 4]"));
    // A zero scale is a zero range: refused like quantize() refuses it.
    auto zero_scale = edit([&](record::Map& m) {
        std::get<record::Map>(field(m, "quant").variant())[2].second =
            TensorData(std::vector<float>{0.1f, 0.f, 0.1f, 0.1f}, {4});
    });
    CHECK_THAT(msg(zero_scale), Catch::Contains("scale[1] is 0"));
}

TEST_CASE("int8 Conv2d equals the convolution of PyTorch's quantized values, on every kernel",
          "[quant]") {
    using B = Cpu;
    for (const char* name : {"conv_pad", "conv_stride"}) {
        INFO(name);
        Fixture f("quant", name);
        const auto s = static_cast<std::size_t>(f.param("stride"));
        const auto p = static_cast<std::size_t>(f.param("padding"));
        const auto d = static_cast<std::size_t>(f.param("dilation"));
        auto w = f.named_tensor<B, 4>("weight");
        const auto ws = w.dims();
        auto conv = nn::Conv2dConfig{{ws[1], ws[0]}, {ws[2], ws[3]}}
                        .with_stride({s, s})
                        .with_dilation({d, d})
                        .with_padding(nn::PaddingConfig2d::Explicit(p, p))
                        .init<B>();
        conv.weight = Param<Tensor<B, 4>>(w);
        conv.bias = Param<Tensor<B, 1>>(f.named_tensor<B, 1>("bias"));
        auto q = conv.quantize_weights(quant::Quantizer<>{});
        REQUIRE(q.weight.quantized());
        CHECK(q.weight.quantized()->weight.scheme().axis ==
              0);  // output channels of [out, in, kh, kw]
        auto x = f.named_tensor<B, 4>("input");
        for (const char* kernel : {"avx512vnni", "avxvnni", "portable"}) {
            if (!cpu::set_qgemm_kernel(kernel)) continue;
            INFO(kernel);
            check_close(q.forward(x).to_data(), f.named("exact"), {1e-5, 1e-5});
        }
        cpu::set_qgemm_kernel("auto");
        // The composed default (fake-quantized input, dequantized weight) means the same.
        const ConvOptions<2> o{{s, s}, {p, p}, {d, d}, 1};
        Tensor<B, 4> def(BackendBase<B>::q_conv2d(
            x.primitive(), q.weight.quantized()->weight.primitive(),
            std::optional(conv.bias->val().primitive()), o, quant::ActivationQuantization{}));
        check_close(def.to_data(), f.named("exact"), {1e-5, 1e-5});
        // Static activations calibrated on this batch give the same parameters.
        auto observed = quant::observe_activations(q);
        (void)observed.forward(x);
        check_close(quant::freeze_activations(observed).forward(x).to_data(), f.named("exact"),
                    {1e-5, 1e-5});
    }
}

}  // namespace test_quant_module
