// The module system: the seed's PositionWiseFeedForward declared with EMBER_MODULE, and every
// generated method (visit, map, records, devices, valid, display, lazy initialisation).
#include <ember/nn/dropout.hpp>
#include <ember/nn/linear.hpp>
#include <ember/record/recorder.hpp>
#include <filesystem>
#include <unistd.h>

#include "module_check.hpp"

namespace test_module {

namespace {

template <ember::Backend B>
struct PositionWiseFeedForward {
    ember::nn::Linear<B> linear_inner;
    ember::nn::Linear<B> linear_outer;
    ember::nn::Dropout dropout;
    ember::nn::Gelu gelu;
    EMBER_MODULE(PositionWiseFeedForward, linear_inner, linear_outer, dropout, gelu)

    template <std::size_t D>
    ember::Tensor<B, D> forward(ember::Tensor<B, D> input) const {
        auto x = linear_inner.forward(input);
        x = gelu.forward(x);
        x = dropout.forward(x);
        return linear_outer.forward(x);
    }
};

struct PositionWiseFeedForwardConfig {
    std::size_t d_model;
    std::size_t d_ff;
    double dropout = 0.1;
    EMBER_CONFIG(PositionWiseFeedForwardConfig, d_model, d_ff, dropout)

    template <ember::Backend B>
    PositionWiseFeedForward<B> init(const ember::Device<B>& device) const {
        return {ember::nn::LinearConfig{d_model, d_ff}.init<B>(device),
                ember::nn::LinearConfig{d_ff, d_model}.init<B>(device),
                ember::nn::DropoutConfig{dropout}.init(), ember::nn::Gelu{}};
    }
};

using B = ember::Autodiff<ember::Cpu>;

}  // namespace

TEST_CASE("the seed's PositionWiseFeedForward", "[module]") {
    ember::Device<B> device{};
    auto config = PositionWiseFeedForwardConfig{8, 32}.with_dropout(0.0);
    auto model = config.init<B>(device);
    static_assert(ember::module::Module<PositionWiseFeedForward<B>>);

    SECTION("with_<field> builders copy and set one field") {
        CHECK(config.d_model == 8);
        CHECK(config.dropout == 0.0);
        CHECK(PositionWiseFeedForwardConfig{1, 2}.dropout == 0.1);
    }
    SECTION("forward and backward reach every parameter") {
        auto x = ember::Tensor<B, 3>::random({2, 3, 8}, ember::Distribution::Default, device);
        auto y = model.forward(x);
        CHECK(y.dims() == std::array<std::size_t, 3>{2, 3, 8});
        auto grads = y.sum().backward();
        model.visit([&](std::string_view path, const auto& p) {
            INFO(path);
            auto g = p.val().grad(grads);
            REQUIRE(g.has_value());
            CHECK(g->shape() == p.shape());
        });
    }
    SECTION("num_params counts weights and biases") {
        CHECK(model.num_params() == 8 * 32 + 32 + 32 * 8 + 8);
    }
    SECTION("visit walks parameters in field order with dotted paths") {
        std::vector<std::string> paths;
        model.visit([&](std::string_view path, const auto&) { paths.emplace_back(path); });
        CHECK(paths == std::vector<std::string>{"linear_inner.weight", "linear_inner.bias",
                                                "linear_outer.weight", "linear_outer.bias"});
    }
    SECTION("map replaces parameters and keeps ids") {
        auto zero = model.map(
            [](std::string_view, const auto& p) { return p.map([](auto t) { return t * 0.0; }); });
        CHECK(zero.linear_inner.weight.id() == model.linear_inner.weight.id());
        CHECK(zero.linear_inner.weight.val().abs().sum().into_scalar() == 0.0f);
        CHECK(zero.linear_inner.weight.is_require_grad());
    }
    SECTION("no_grad freezes every parameter") {
        auto frozen = model.no_grad();
        std::size_t trainable = 0;
        frozen.visit([&](std::string_view, const auto& p) { trainable += p.is_require_grad(); });
        CHECK(trainable == 0);
        CHECK(frozen.num_params() == model.num_params());
    }
    SECTION("devices, to_device and fork") {
        auto devices = model.devices();
        REQUIRE(devices.size() == 1);
        CHECK(devices[0] == device);
        auto moved = model.to_device(device);
        CHECK(moved.linear_outer.weight.id() == model.linear_outer.weight.id());
        CHECK(moved.linear_outer.weight.val().is_require_grad());
        auto forked = model.fork(device);
        CHECK(forked.linear_outer.weight.val().to_data() == model.linear_outer.weight.val().to_data());
    }
    SECTION("valid is the same module on the inner backend") {
        auto inner = model.valid();
        static_assert(std::is_same_v<decltype(inner), PositionWiseFeedForward<ember::Cpu>>);
        auto x = ember::Tensor<B, 2>::random({4, 8}, ember::Distribution::Default, device);
        ember::test::check_close(inner.forward(x.inner()).to_data(), model.forward(x).to_data());
        CHECK(inner.linear_inner.weight.id() == model.linear_inner.weight.id());
    }
    SECTION("display is a tree with parameter counts") {
        std::ostringstream os;
        os << model;
        CHECK(os.str() ==
              "PositionWiseFeedForward {\n"
              "  linear_inner: Linear {d_input: 8, d_output: 32, bias: true, params: 288}\n"
              "  linear_outer: Linear {d_input: 32, d_output: 8, bias: true, params: 264}\n"
              "  dropout: Dropout {prob: 0}\n"
              "  gelu: Gelu\n"
              "  params: 552\n"
              "}");
    }
}

TEST_CASE("module records", "[module][record]") {
    ember::Device<B> device{};
    auto config = PositionWiseFeedForwardConfig{3, 5};
    auto model = config.init<B>(device);

    SECTION("into_record then load_record restores values and ids exactly") {
        auto record = model.into_record();
        auto loaded = config.init<B>(device).load_record(record);
        CHECK(loaded.linear_inner.weight.id() == model.linear_inner.weight.id());
        CHECK(loaded.linear_outer.bias->val().to_data() == model.linear_outer.bias->val().to_data());
        CHECK(loaded.linear_inner.weight.val().is_require_grad());
    }
    SECTION("init then load_record draws no random weights") {
        auto record = model.into_record();
        ember::Cpu::seed(1234);
        auto fresh = config.init<B>(device);
        auto loaded = fresh.load_record(record);
        auto after = ember::Tensor<ember::Cpu, 1>::random({16}, ember::Distribution::Default);
        ember::Cpu::seed(1234);
        auto expected = ember::Tensor<ember::Cpu, 1>::random({16}, ember::Distribution::Default);
        CHECK(after.to_data() == expected.to_data());
        CHECK_FALSE(fresh.linear_inner.weight.is_initialized());
    }
    SECTION("records convert to the module's dtype") {
        auto record = model.into_record();
        auto& w = record.as_mut<ember::record::Map>()[0].second.as_mut<ember::record::Map>()[0]
                      .second.as_mut<ember::record::Map>()[1].second;
        w = w.as<ember::TensorData>().convert(ember::DType::F64);
        auto loaded = config.init<B>(device).load_record(record);
        CHECK(loaded.linear_inner.weight.val().dtype() == ember::DType::F32);
        CHECK(loaded.linear_inner.weight.val().to_data() == model.linear_inner.weight.val().to_data());
    }
    SECTION("a record of the wrong shape names the parameter") {
        auto other = PositionWiseFeedForwardConfig{3, 6}.init<B>(device).into_record();
        REQUIRE_THROWS_AS(model.load_record(other), ember::ShapeError);
        REQUIRE_THROWS_WITH(model.load_record(other),
                            Catch::Contains("linear_inner.weight") && Catch::Contains("[3, 6]") &&
                                Catch::Contains("[3, 5]"));
    }
    SECTION("a record missing a field names it") {
        auto record = model.into_record();
        record.as_mut<ember::record::Map>().erase(record.as_mut<ember::record::Map>().begin() + 1);
        REQUIRE_THROWS_WITH(model.load_record(record), Catch::Contains("linear_outer"));
    }
    SECTION("a record of the wrong kind names the path") {
        ember::record::Value record = ember::record::Map{{"linear_inner", 3}};
        REQUIRE_THROWS_AS(model.load_record(record), ember::FormatError);
        REQUIRE_THROWS_WITH(model.load_record(record), Catch::Contains("linear_inner"));
    }
}

TEST_CASE("module gradients match finite differences", "[module]") {
    using F = ember::test::AutodiffF64;
    auto model = PositionWiseFeedForwardConfig{3, 4}.with_dropout(0.0).init<F>({});
    auto x = ember::Tensor<F, 2>::random({2, 3}, ember::Distribution::Normal(0, 1));
    ember::test::check_param_grads_fd(model, [&](const auto& m) { return m.forward(x).sum(); });
}

namespace {

// A module with every kind of field: a vector and an optional of modules, a frozen parameter,
// a constant tensor and a plain constant.
template <ember::Backend B>
struct Mixed {
    std::vector<ember::nn::Linear<B>> layers;
    std::optional<ember::nn::Linear<B>> head;
    ember::Param<ember::Tensor<B, 1>> scale;
    ember::Tensor<B, 1> offsets;
    std::size_t repeat;
    EMBER_MODULE(Mixed, layers, head, scale, offsets, repeat)
};

template <ember::Backend B>
Mixed<B> make_mixed(bool with_head) {
    std::vector<ember::nn::Linear<B>> layers;
    for (std::size_t i = 0; i < 2; ++i) layers.push_back(ember::nn::LinearConfig{2, 2}.init<B>());
    std::optional<ember::nn::Linear<B>> head;
    if (with_head) head = ember::nn::LinearConfig{2, 1}.with_bias(false).init<B>();
    return {std::move(layers), std::move(head),
            ember::Param<ember::Tensor<B, 1>>(ember::Tensor<B, 1>::ones({2})).set_require_grad(false),
            ember::Tensor<B, 1>::from_floats({1.f, 2.f}), 3};
}

}  // namespace

TEST_CASE("modules holding vectors, optionals, frozen parameters and constants", "[module]") {
    auto model = make_mixed<B>(true);

    SECTION("visit reaches vector elements by index and the optional when present") {
        std::vector<std::string> paths;
        model.visit([&](std::string_view path, const auto&) { paths.emplace_back(path); });
        CHECK(paths == std::vector<std::string>{"layers.0.weight", "layers.0.bias",
                                                "layers.1.weight", "layers.1.bias", "head.weight",
                                                "scale"});
        CHECK(model.num_params() == 2 * 6 + 2 + 2);
        std::size_t visited = 0;
        make_mixed<B>(false).visit([&](std::string_view, const auto&) { ++visited; });
        CHECK(visited == 5);
    }
    SECTION("frozen parameters are recorded; constants are not") {
        auto record = model.into_record();
        CHECK(record.at("scale").at("param").as<ember::TensorData>().shape() == ember::Shape{2});
        CHECK(record.at("offsets").is_null());
        CHECK(record.at("repeat").is_null());
        CHECK(record.at("layers").as<ember::record::List>().size() == 2);
        auto loaded = make_mixed<B>(true).load_record(record);
        CHECK_FALSE(loaded.scale.is_require_grad());
        CHECK(loaded.layers[1].weight.val().to_data() == model.layers[1].weight.val().to_data());
        CHECK(loaded.repeat == 3);
    }
    SECTION("a record whose optional or vector does not fit names the path") {
        REQUIRE_THROWS_WITH(make_mixed<B>(false).load_record(model.into_record()),
                            Catch::Contains("head"));
        auto record = model.into_record();
        record.as_mut<ember::record::Map>()[0].second.as_mut<ember::record::List>().pop_back();
        REQUIRE_THROWS_AS(model.load_record(record), ember::ShapeError);
    }
    SECTION("valid rebinds every field to the inner backend") {
        auto inner = model.valid();
        static_assert(std::is_same_v<decltype(inner), Mixed<ember::Cpu>>);
        CHECK(inner.offsets.to_data() == model.offsets.inner().to_data());
        CHECK(inner.head->weight.id() == model.head->weight.id());
    }
    SECTION("display shows the tree, vectors and constants") {
        std::ostringstream os;
        os << make_mixed<ember::Cpu>(false);
        CHECK(os.str() ==
              "Mixed {\n"
              "  layers: [\n"
              "    Linear {d_input: 2, d_output: 2, bias: true, params: 6},\n"
              "    Linear {d_input: 2, d_output: 2, bias: true, params: 6},\n"
              "  ]\n"
              "  head: None\n"
              "  scale: Param {shape: [2], dtype: f32, frozen}\n"
              "  offsets: Tensor {shape: [2], dtype: f32}\n"
              "  repeat: 3\n"
              "  params: 14\n"
              "}");
    }
}

namespace {

namespace rec = ember::record;

// Whether a recorder keeps f32 values exactly (half precision rounds them).
template <typename R>
constexpr bool exact_f32 = R::precision.float_dtype != ember::DType::F16;

struct ScratchDir {
    std::filesystem::path path;
    ScratchDir()
        : path(std::filesystem::temp_directory_path() /
               ("ember-module-" + std::to_string(::getpid()))) {
        std::filesystem::remove_all(path);
        std::filesystem::create_directories(path);
    }
    ~ScratchDir() { std::filesystem::remove_all(path); }
};

}  // namespace

TEMPLATE_TEST_CASE("modules saved and loaded by every recorder at every precision",
                   "[module][record]", rec::NamedMpkFileRecorder<rec::FullPrecisionSettings>,
                   rec::NamedMpkFileRecorder<rec::DoublePrecisionSettings>,
                   rec::NamedMpkFileRecorder<rec::HalfPrecisionSettings>,
                   rec::NamedMpkGzFileRecorder<rec::FullPrecisionSettings>,
                   rec::NamedMpkGzFileRecorder<rec::HalfPrecisionSettings>,
                   rec::BinFileRecorder<rec::FullPrecisionSettings>,
                   rec::BinFileRecorder<rec::DoublePrecisionSettings>,
                   rec::BinGzFileRecorder<rec::FullPrecisionSettings>,
                   rec::BinGzFileRecorder<rec::HalfPrecisionSettings>,
                   rec::JsonGzFileRecorder<rec::FullPrecisionSettings>,
                   rec::JsonGzFileRecorder<rec::DoublePrecisionSettings>,
                   rec::PrettyJsonFileRecorder<rec::FullPrecisionSettings>,
                   rec::PrettyJsonFileRecorder<rec::HalfPrecisionSettings>) {
    using R = TestType;
    ScratchDir dir;
    ember::Device<B> device{};
    auto config = PositionWiseFeedForwardConfig{3, 5};
    auto model = config.init<B>(device);
    R recorder;

    model.save_file(dir.path / "model", recorder);
    const auto file = dir.path / ("model." + std::string(R::extension));
    REQUIRE(std::filesystem::exists(file));
    CHECK(std::distance(std::filesystem::directory_iterator(dir.path),
                        std::filesystem::directory_iterator{}) == 1);  // no temporary left

    auto loaded = config.init<B>(device).load_file(dir.path / "model", recorder, device);
    model.visit([&](std::string_view path, const auto& p) {
        INFO(path);
        bool found = false;
        loaded.visit([&](std::string_view q, const auto& l) {
            if (q != path) return;
            found = true;
            CHECK(l.id() == p.id());
            CHECK(l.val().dtype() == ember::DType::F32);
            const auto expected = p.val().to_data();
            if constexpr (exact_f32<R>) {
                CHECK(l.val().to_data() == expected);  // bit-exact
            } else {
                CHECK(l.val().to_data() == expected.convert(ember::DType::F16).convert(ember::DType::F32));
            }
        });
        CHECK(found);
    });

    SECTION("a truncated file is a FormatError naming it") {
        const auto size = std::filesystem::file_size(file);
        std::filesystem::resize_file(file, size / 2);
        REQUIRE_THROWS_AS(model.load_file(dir.path / "model", recorder, device), ember::FormatError);
        REQUIRE_THROWS_WITH(model.load_file(dir.path / "model", recorder, device),
                            Catch::Contains(file.filename().string()));
    }
    SECTION("a record of another model names the mismatching parameter") {
        PositionWiseFeedForwardConfig{3, 4}.init<B>(device).save_file(dir.path / "other", recorder);
        REQUIRE_THROWS_WITH(model.load_file(dir.path / "other", recorder, device),
                            Catch::Contains("linear_inner.weight"));
    }
}

TEST_CASE("modules in memory with BinBytesRecorder", "[module][record]") {
    auto config = PositionWiseFeedForwardConfig{3, 5};
    auto model = config.init<B>({});
    rec::BinBytesRecorder<> recorder;
    const std::vector<std::byte> bytes = recorder.record(model.into_record());
    auto loaded = config.init<B>({}).load_record(recorder.load(bytes));
    CHECK(loaded.linear_outer.weight.val().to_data() == model.linear_outer.weight.val().to_data());
    std::vector<std::byte> cut(bytes.begin(), bytes.begin() + std::ptrdiff_t(bytes.size() - 3));
    REQUIRE_THROWS_AS(recorder.load(cut), ember::FormatError);
}

}  // namespace test_module
