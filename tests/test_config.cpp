// Configs: with_<field> builders, JSON text and file round trips of every built-in config, and
// the errors of strict loading.
#include <filesystem>
#include <fstream>

#include <ember/nn.hpp>
#include <ember/optim.hpp>

#include "harness.hpp"

namespace test_config {

namespace {

namespace fs = std::filesystem;

struct TinyConfig {
    std::size_t width;
    double rate = 0.5;
    bool flag = true;
    std::string name = "tiny";
    std::optional<std::vector<std::size_t>> sizes{};
    ember::nn::Initializer init = ember::nn::Initializer::Normal(0.0, 2.0);
    EMBER_CONFIG(TinyConfig, width, rate, flag, name, sizes, init)
};

// A fresh directory under the system's temporary directory, removed at the end of the test.
struct TempDir {
    fs::path path;
    TempDir() : path(fs::temp_directory_path() / ("ember-config-" + std::to_string(::getpid()))) {
        fs::remove_all(path);
        fs::create_directories(path);
    }
    ~TempDir() { fs::remove_all(path); }
};

void write(const fs::path& p, const std::string& text) { std::ofstream(p) << text; }

template <typename C>
void check_round_trip(const C& config) {
    INFO(C::ember_type_name << ": " << config.to_json(false));
    const auto text = config.to_json();
    auto back = C::from_json(text);
    CHECK(back.to_json() == text);
    CHECK(ember::record::to_value(back) == ember::record::to_value(config));
}

}  // namespace

TEST_CASE("config builders and defaults", "[config]") {
    TinyConfig c{4};
    CHECK(c.rate == 0.5);
    auto d = c.with_rate(0.25).with_sizes(std::vector<std::size_t>{1, 2});
    CHECK(d.rate == 0.25);
    CHECK(d.sizes->size() == 2);
    CHECK(c.rate == 0.5);  // builders copy
    CHECK(d.width == 4);
}

TEST_CASE("config JSON", "[config]") {
    TinyConfig c = TinyConfig{4}.with_sizes(std::vector<std::size_t>{1, 2});

    SECTION("fields in declaration order, nested configs as objects") {
        CHECK(c.to_json(false) ==
              R"({"width":4,"rate":0.5,"flag":true,"name":"tiny","sizes":[1,2],)"
              R"("init":{"kind":4,"a":0.0,"b":2.0,"fan_out_only":false}})");
        std::ostringstream os;
        os << TinyConfig{1};
        CHECK(os.str().find(R"("sizes":null)") != std::string::npos);
    }
    SECTION("pretty text parses back to the same config") { check_round_trip(c); }
    SECTION("a whole number is accepted for a float field") {
        auto back = TinyConfig::from_json(
            R"({"width":4,"rate":1,"flag":true,"name":"x","sizes":null,)"
            R"("init":{"kind":0,"a":3,"b":0,"fan_out_only":false}})");
        CHECK(back.rate == 1.0);
        CHECK(back.init == ember::nn::Initializer::Constant(3.0));
    }
    SECTION("a missing field is an error naming it") {
        REQUIRE_THROWS_AS(TinyConfig::from_json(R"({"width":4})"), ember::FormatError);
        REQUIRE_THROWS_WITH(TinyConfig::from_json(R"({"width":4})"), Catch::Contains("rate"));
    }
    SECTION("a field of the wrong type is an error naming it") {
        auto text = c.to_json();
        text.replace(text.find("0.5"), 3, "\"fast\"");
        REQUIRE_THROWS_AS(TinyConfig::from_json(text), ember::FormatError);
        REQUIRE_THROWS_WITH(TinyConfig::from_json(text),
                            Catch::Contains("rate") && Catch::Contains("string"));
    }
    SECTION("a negative size is out of range") {
        auto text = c.to_json(false);
        text.replace(text.find("\"width\":4"), 9, "\"width\":-4");
        REQUIRE_THROWS_WITH(TinyConfig::from_json(text), Catch::Contains("width"));
    }
    SECTION("malformed JSON and non-objects are errors") {
        REQUIRE_THROWS_AS(TinyConfig::from_json("{\"width\": 4,"), ember::FormatError);
        REQUIRE_THROWS_AS(TinyConfig::from_json("[1, 2]"), ember::FormatError);
    }
    SECTION("non-finite numbers cannot be written") {
        REQUIRE_THROWS_AS(c.with_rate(std::numeric_limits<double>::infinity()).to_json(),
                          ember::ArgumentError);
    }
}

TEST_CASE("config files", "[config]") {
    TempDir dir;
    TinyConfig c = TinyConfig{7}.with_name("saved");
    const auto file = dir.path / "tiny.json";

    SECTION("save then load") {
        c.save(file);
        auto back = TinyConfig::load(file);
        CHECK(back.width == 7);
        CHECK(back.name == "saved");
        CHECK(std::distance(fs::directory_iterator(dir.path), fs::directory_iterator{}) == 1);
    }
    SECTION("saving replaces an existing file") {
        write(file, "old");
        c.save(file);
        CHECK(TinyConfig::load(file).width == 7);
    }
    SECTION("a missing file names the path") {
        REQUIRE_THROWS_AS(TinyConfig::load(dir.path / "none.json"), ember::FormatError);
        REQUIRE_THROWS_WITH(TinyConfig::load(dir.path / "none.json"), Catch::Contains("none.json"));
    }
    SECTION("errors in a file name the file and the field") {
        write(file, R"({"width": 1})");
        REQUIRE_THROWS_WITH(TinyConfig::load(file),
                            Catch::Contains("tiny.json") && Catch::Contains("rate"));
    }
    SECTION("saving into a missing directory fails and writes nothing") {
        REQUIRE_THROWS_AS(c.save(dir.path / "no" / "such.json"), ember::Error);
        CHECK_FALSE(fs::exists(dir.path / "no"));
    }
}

TEST_CASE("every built-in config round-trips through JSON", "[config]") {
    using namespace ember::nn;
    check_round_trip(LinearConfig{3, 4}.with_bias(false));
    check_round_trip(DropoutConfig{0.3});
    check_round_trip(EmbeddingConfig{10, 4});
    check_round_trip(BatchNormConfig{3});
    check_round_trip(GroupNormConfig{2, 4});
    check_round_trip(InstanceNormConfig{3});
    check_round_trip(LayerNormConfig{8});
    check_round_trip(RmsNormConfig{8});
    check_round_trip(HardSigmoidConfig{});
    check_round_trip(LeakyReluConfig{});
    check_round_trip(PReluConfig{});
    check_round_trip(SwiGluConfig{4, 8});
    check_round_trip(Interpolate1dConfig{});
    check_round_trip(Interpolate2dConfig{});
    check_round_trip(Conv1dConfig{2, 4, 3}.with_padding(PaddingConfig1d::Same()));
    check_round_trip(Conv2dConfig{{2, 4}, {3, 3}}.with_padding(PaddingConfig2d::Explicit(1, 2)));
    check_round_trip(Conv3dConfig{{2, 4}, {3, 3, 3}});
    check_round_trip(ConvTranspose1dConfig{{2, 4}, 3});
    check_round_trip(ConvTranspose2dConfig{{2, 4}, {3, 3}});
    check_round_trip(ConvTranspose3dConfig{{2, 4}, {3, 3, 3}});
    check_round_trip(DeformConv2dConfig{{2, 4}, {3, 3}});
    check_round_trip(AvgPool1dConfig{2});
    check_round_trip(AvgPool2dConfig{{2, 2}});
    check_round_trip(MaxPool1dConfig{2});
    check_round_trip(MaxPool2dConfig{{2, 2}});
    check_round_trip(AdaptiveAvgPool1dConfig{4});
    check_round_trip(AdaptiveAvgPool2dConfig{{4, 4}});
    check_round_trip(GateControllerConfig{3, 4});
    check_round_trip(LstmConfig{3, 4});
    check_round_trip(BiLstmConfig{3, 4});
    check_round_trip(GruConfig{3, 4});
    check_round_trip(MultiHeadAttentionConfig{8, 2});
    check_round_trip(PositionWiseFeedForwardConfig{8, 16});
    check_round_trip(TransformerEncoderConfig{8, 16, 2, 2}.with_norm_first(true));
    check_round_trip(TransformerDecoderConfig{8, 16, 2, 2});
    check_round_trip(PositionalEncodingConfig{8});
    check_round_trip(RotaryEncodingConfig{16, 8});
    check_round_trip(loss::CrossEntropyLossConfig{}.with_smoothing(0.1));
    check_round_trip(loss::BinaryCrossEntropyLossConfig{});
    check_round_trip(loss::HuberLossConfig{});
    using namespace ember::optim;
    check_round_trip(SgdConfig{}.with_momentum(MomentumConfig{}));
    check_round_trip(AdamConfig{}.with_grad_clipping(GradientClipping::Norm(1.0)));
    check_round_trip(AdamWConfig{});
    check_round_trip(RmsPropConfig{});
    check_round_trip(AdaGradConfig{});
    check_round_trip(AdanConfig{}.with_no_prox(true));
    check_round_trip(MuonConfig{}.with_adjust_lr(MuonAdjustLr::MatchRmsAdamW));
    check_round_trip(LbfgsConfig{}.with_line_search(LbfgsLineSearch::StrongWolfe));
    using namespace ember::lr_scheduler;
    check_round_trip(LinearLrSchedulerConfig{1.0, 0.1, 10});
    check_round_trip(CosineAnnealingLrSchedulerConfig{1.0, 10});
    check_round_trip(ExponentialLrSchedulerConfig{1.0, 0.9});
    check_round_trip(StepLrSchedulerConfig{1.0, 3});
    check_round_trip(NoamLrSchedulerConfig{1.0});
}

}  // namespace test_config
