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

#include "fuzz.hpp"

namespace {

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
        load_as<nn::TransformerEncoderConfig>(tree);
        load_as<nn::Conv2dConfig>(tree);
        load_as<nn::LstmConfig>(tree);
        load_as<nn::Interpolate2dConfig>(tree);
        load_as<nn::LinearConfig>(tree);
        load_as<optim::AdamConfig>(tree);
        load_as<optim::SgdConfig>(tree);
        load_as<lr_scheduler::NoamLrSchedulerConfig>(tree);
    });
}
