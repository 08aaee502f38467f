// Config JSON (src/module/config.cpp and record::from_value): the JSON text, its nesting and
// numbers, then the tree read as several of ember's configs: nested configs, optionals, arrays,
// enums and the initializer's tagged union.
// The headers one by one: clang 14 cannot compile nn/loss.hpp (a lambda captures a structured
// binding, which clang accepts from version 16).
#include <ember/nn/conv.hpp>
#include <ember/nn/interpolate.hpp>
#include <ember/nn/linear.hpp>
#include <ember/nn/rnn.hpp>
#include <ember/nn/transformer.hpp>
#include <ember/optim/adam.hpp>
#include <ember/optim/lr_scheduler.hpp>
#include <ember/optim/sgd.hpp>

#include <map>

#include "fuzz.hpp"

namespace {

enum class Mode : int { Nearest, Linear, Cubic };

// A config of every field kind ember's configs use: nested configs, optionals, arrays, vectors,
// maps, enums and a tagged union (the padding).
struct Inner {
    double rate = 0.5;
    std::optional<std::array<std::size_t, 2>> size;
    EMBER_CONFIG(Inner, rate, size)
};
struct Outer {
    std::size_t d_model;
    std::vector<std::int32_t> dims;
    bool flag = false;
    std::string name = "x";
    Mode mode = Mode::Linear;
    std::optional<Inner> inner;
    std::map<std::string, double> weights;
    ember::nn::PaddingConfig2d padding = ember::nn::PaddingConfig2d::Same();
    EMBER_CONFIG(Outer, d_model, dims, flag, name, mode, inner, weights, padding)
};

template <class C>
void load_as(const ember::record::Value& tree) {
    ember::fuzz::refused_or_fine([&] {
        const C config = ember::record::from_value<C>(tree, "config");
        (void)ember::config::to_json(config, false);  // what loads must write back
    });
}

}  // namespace

EMBER_FUZZ_TARGET(config) {
    using namespace ember;
    fuzz::refused_or_fine([&] {
        const record::Value tree = config::detail::value_from_json(fuzz::as_text(input), "fuzz");
        load_as<Outer>(tree);
        load_as<lr_scheduler::NoamLrSchedulerConfig>(tree);
        load_as<lr_scheduler::CosineAnnealingLrSchedulerConfig>(tree);
        load_as<nn::TransformerEncoderConfig>(tree);
        load_as<nn::Conv2dConfig>(tree);
        load_as<nn::LstmConfig>(tree);
        load_as<nn::Interpolate2dConfig>(tree);
        load_as<nn::LinearConfig>(tree);
        load_as<optim::AdamConfig>(tree);
        load_as<optim::SgdConfig>(tree);
    });
}
