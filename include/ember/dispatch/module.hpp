#pragma once
// The module layer on ember::Dispatch: EMBER_MODULE/EMBER_CONFIG, parameters and the
// initializer over <ember/dispatch/tensor.hpp>, with the instances every model reaches compiled
// once in ember_dispatch and declared extern here: the parameters of ranks 1-4
// (EMBER_DISPATCH_PARAM_CLASSES), Initializer::init and the functional linear
// (EMBER_DISPATCH_PART_MODULE). Each module adds its own part: include
// <ember/dispatch/nn/linear.hpp> where a generic file includes <ember/nn/linear.hpp>, and so on
// (<ember/dispatch/instance_lists.hpp> lists them).
#include "../module/config.hpp"
#include "../module/module.hpp"
#include "../nn/initializer.hpp"
#include "instance_lists.hpp"
#include "tensor.hpp"

namespace ember {
#if EMBER_DISPATCH_CLASS_INSTANCES && !defined(EMBER_DISPATCH_INSTANTIATING)
EMBER_DISPATCH_PARAM_CLASSES(EMBER_DISPATCH_EXTERN_CLASS)
#endif
EMBER_DISPATCH_DECLARE_PART(EMBER_DISPATCH_PART_MODULE)
}  // namespace ember
