// Tensor-level quantization against PyTorch (tests/fixtures/gen_quant.py): quantize with given
// and calibrated parameters in every scheme, dequantize, layout ops, integer matmul, and one
// test per error class.
#include <ember/quant/tensor.hpp>

#include "harness.hpp"

namespace test_quant {

using namespace ember;
using ember::test::check_close;
using ember::test::check_equal;
using ember::test::Fixture;
using quant::QuantizationMode;
using quant::QuantizationScheme;

namespace {

QuantizationScheme scheme_of(const Fixture& f) {
    const auto& m = f.str("mode");
    const long axis = static_cast<long>(f.param("axis"));
    if (m == "per_tensor_affine") return QuantizationScheme::per_tensor_affine();
    if (m == "per_tensor_symmetric") return QuantizationScheme::per_tensor_symmetric();
    if (m == "per_channel_affine") return QuantizationScheme::per_channel_affine(axis);
    return QuantizationScheme::per_channel_symmetric(axis);
}

template <typename B>
quant::QuantizationParameters<B> qparams_of(const Fixture& f) {
    quant::QuantizationParameters<B> q{f.named_tensor<B, 1>("scale"), std::nullopt};
    if (f.has("offset")) q.offset = f.named_tensor<B, 1, Int>("offset");
    return q;
}

template <std::size_t D>
void check_quantize_case(const std::string& name) {
    using B = Cpu;
    Fixture f("quant", name);
    const auto scheme = scheme_of(f);
    auto x = f.named_tensor<B, D>("x");
    // Given parameters (PyTorch's, from the fixture).
    auto q = x.quantize(scheme, qparams_of<B>(f));
    CHECK(q.to_data().dtype() == DType::I8);
    check_equal(q.to_data().convert(DType::I64), f.named("q"));
    check_close(q.dequantize().to_data(), f.named("deq"), {1e-6, 1e-6});
    if (name.rfind("minmax_", 0) != 0) return;
    // Parameters from ember's own calibration equal PyTorch's observers'.
    auto range = quant::MinMaxCalibration{scheme}.compute_range(x);
    auto qp = scheme.compute_q_params(range);
    check_close(qp.scale.to_data(), f.named("scale"), {0.0, 0.0});
    CHECK(qp.offset.has_value() == f.has("offset"));
    if (qp.offset) check_equal(qp.offset->to_data(), f.named("offset"));
    auto qd = x.quantize_dynamic(scheme);
    check_equal(qd.to_data().convert(DType::I64), f.named("q"));
    check_close(qd.dequantize().to_data(), f.named("deq"), {1e-6, 1e-6});
}

}  // namespace

TEST_CASE("quantize with given parameters matches torch.quantize_per_tensor/_per_channel",
          "[quant]") {
    check_quantize_case<2>("given_per_tensor_affine");
    check_quantize_case<2>("given_per_channel_affine");
}

TEST_CASE("min-max calibration matches PyTorch's observers in every scheme", "[quant]") {
    for (const char* mode : {"per_tensor_affine", "per_tensor_symmetric", "per_channel_affine",
                             "per_channel_symmetric"}) {
        INFO(mode);
        check_quantize_case<2>(std::string("minmax_") + mode + "_2d");
        check_quantize_case<4>(std::string("minmax_") + mode + "_4d");
    }
    check_quantize_case<2>("minmax_zero_range");
}

TEST_CASE("quantized tensors on Autodiff<Cpu> use the composed defaults", "[quant]") {
    using A = Autodiff<Cpu>;
    Fixture f("quant", "minmax_per_channel_affine_2d");
    auto x = f.named_tensor<A, 2>("x");
    auto q = x.quantize_dynamic(QuantizationScheme::per_channel_affine(1));
    check_equal(q.to_data().convert(DType::I64), f.named("q"));
    check_close(q.dequantize().to_data(), f.named("deq"), {1e-6, 1e-6});
}

TEST_CASE("layout ops on quantized tensors are exact and keep per-channel parameters", "[quant]") {
    using B = Cpu;
    Fixture f("quant", "minmax_per_channel_symmetric_4d");  // axis 0, shape [3, 2, 4, 4]
    auto x = f.named_tensor<B, 4>("x");
    auto q = x.quantize_dynamic(QuantizationScheme::per_channel_symmetric(0));
    auto deq = q.dequantize();
    // permute moves the channel axis with its dim.
    auto p = q.permute({2, 0, 3, 1});
    CHECK(p.scheme().axis == 1);
    check_close(p.dequantize().to_data(), deq.permute({2, 0, 3, 1}).to_data(), {0, 0});
    // reshape merges dims around the channel axis, never through it.
    auto r = q.reshape<2>(Shape{3, 32});
    CHECK(r.scheme().axis == 0);
    check_close(r.dequantize().to_data(), deq.reshape<2>({3, 32}).to_data(), {0, 0});
    CHECK_THROWS_AS(q.reshape<2>(Shape{6, 16}), ShapeError);
    // slice and flip cut and reverse the channels' parameters too.
    const Slice ranges[] = {Slice{1, 3}, Slice{0, 1}};
    auto s = q.slice(ranges);
    check_close(s.dequantize().to_data(), deq.slice(ranges).to_data(), {0, 0});
    const long axes[] = {0, 2};
    check_close(q.flip(axes).dequantize().to_data(), deq.flip(axes).to_data(), {0, 0});
    // relu stays quantized and equals relu of the dequantized values.
    auto qa = x.quantize_dynamic(QuantizationScheme::per_tensor_affine());
    check_close(qa.relu().dequantize().to_data(), activation::relu(qa.dequantize()).to_data(),
                {0, 0});
    // Arithmetic is the float op on the dequantized values.
    check_close(qa.add(x).to_data(), (qa.dequantize() + x).to_data(), {0, 0});
    check_close(qa.mul(q).to_data(), (qa.dequantize() * deq).to_data(), {0, 0});
}

TEST_CASE("quantized matmul: integer sums equal PyTorch's quantized values multiplied exactly",
          "[quant]") {
    using B = Cpu;
    Fixture f("quant", "matmul");
    auto qa = f.named_tensor<B, 2>("a").quantize_dynamic(QuantizationScheme::per_tensor_affine());
    auto qb =
        f.named_tensor<B, 2>("b").quantize_dynamic(QuantizationScheme::per_channel_symmetric(1));
    check_close(qa.matmul(qb).to_data(), f.named("exact"), {1e-6, 1e-5});
    check_close(qa.matmul(qb).to_data(), f.named("deq"), {1e-5, 1e-4});
    // A per-channel axis that does not factor out of the sum goes through float.
    auto qr =
        f.named_tensor<B, 2>("b").quantize_dynamic(QuantizationScheme::per_channel_symmetric(0));
    check_close(qa.matmul(qr).to_data(), qa.dequantize().matmul(qr.dequantize()).to_data(),
                {1e-5, 1e-5});
    CHECK_THROWS_AS(qa.matmul(qa), ShapeError);
}

TEST_CASE("quantization errors name the op and the offending values", "[quant][errors]") {
    using B = Cpu;
    auto x = Tensor<B, 2>::from_data(TensorData({1.f, -2.f, 3.f, 4.f, 0.5f, -1.f}, {2, 3}));
    const auto affine = QuantizationScheme::per_tensor_affine();
    quant::QuantizationParameters<B> good{Tensor<B, 1>::from_floats({0.1f}),
                                          Tensor<B, 1, Int>::from_ints({0})};
    auto msg = [](auto&& f) {
        try {
            f();
        } catch (const Error& e) {
            return std::string(e.what());
        }
        return std::string("no error");
    };
    // Wrong axis.
    CHECK_THROWS_AS(x.quantize_dynamic(QuantizationScheme::per_channel_affine(2)), DimError);
    CHECK_THAT(msg([&] { x.quantize_dynamic(QuantizationScheme::per_channel_affine(-3)); }),
               Catch::Contains("quantize_dynamic") && Catch::Contains("axis -3"));
    CHECK_THROWS_AS(x.quantize_dynamic(QuantizationScheme::per_channel_affine()), ArgumentError);
    // Zero (or negative) scale: a zero range given as parameters.
    quant::QuantizationParameters<B> zero = good;
    zero.scale = Tensor<B, 1>::from_floats({0.f});
    CHECK_THAT(msg([&] { x.quantize(affine, zero); }),
               Catch::Contains("quantize") && Catch::Contains("scale[0] is 0"));
    CHECK_THROWS_AS(x.quantize(affine, zero), ArgumentError);
    // Mismatched parameters: count, presence of offsets, offsets out of range.
    quant::QuantizationParameters<B> two{Tensor<B, 1>::from_floats({0.1f, 0.2f}),
                                         Tensor<B, 1, Int>::from_ints({0, 0})};
    CHECK_THROWS_AS(x.quantize(affine, two), ShapeError);
    CHECK_THAT(msg([&] { x.quantize(QuantizationScheme::per_channel_affine(1), two); }),
               Catch::Contains("needs 3 scale(s), got 2"));
    CHECK_THROWS_AS(x.quantize(QuantizationScheme::per_tensor_symmetric(), good), ArgumentError);
    quant::QuantizationParameters<B> no_offset{good.scale, std::nullopt};
    CHECK_THROWS_AS(x.quantize(affine, no_offset), ArgumentError);
    quant::QuantizationParameters<B> far{good.scale, Tensor<B, 1, Int>::from_ints({300})};
    CHECK_THAT(msg([&] { x.quantize(affine, far); }), Catch::Contains("offset[0] is 300"));
    // A range that is not one.
    quant::CalibrationRange<B> bad{Tensor<B, 1>::from_floats({2.f}),
                                   Tensor<B, 1>::from_floats({1.f})};
    CHECK_THAT(msg([&] { affine.compute_q_params(bad); }),
               Catch::Contains("compute_q_params") && Catch::Contains("[2, 1]"));
    // Non-i8 values.
    const TensorData floats({1.f, 2.f}, {1, 2});
    using Q2 = quant::QuantizedTensor<B, 2>;
    CHECK_THROWS_AS(Q2::from_data(floats, affine, good), DTypeError);
    // An empty tensor has no range.
    const auto empty = Tensor<B, 2>::zeros(Shape{0, 3});
    CHECK_THROWS_AS(empty.quantize_dynamic(affine), ShapeError);
}

TEST_CASE("QuantizedTensor::from_data round-trips the stored values", "[quant]") {
    using B = Cpu;
    Fixture f("quant", "given_per_channel_affine");
    auto q = f.named_tensor<B, 2>("x").quantize(scheme_of(f), qparams_of<B>(f));
    auto back = quant::QuantizedTensor<B, 2>::from_data(q.to_data(), q.scheme(), q.qparams());
    check_equal(back.to_data(), q.to_data());
    check_close(back.dequantize().to_data(), f.named("deq"), {1e-6, 1e-6});
}

}  // namespace test_quant
