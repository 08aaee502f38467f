#pragma once
// The tensor API on ember::Dispatch, without the concrete stacks: what a Dispatch program
// includes in place of <ember/ember.hpp>, which also parses the CPU backend and the Autodiff and
// Fusion decorators with their instances declared extern (a Dispatch program calls them through
// ember_dispatch, never by name). The light core in fmt's manner: the tensor layer, activations,
// the functional module ops, display, transactions and Dispatch itself, with the tensor classes
// of ranks 2-5 compiled once in ember_dispatch and declared extern here
// (EMBER_DISPATCH_TENSOR_CLASSES: a file's own calls still instantiate the members defined in
// the class, to be inlined, but no out-of-line copy is emitted). The model layer on
// Dispatch is <ember/dispatch/module.hpp> and one header a module (<ember/dispatch/nn/*.hpp>),
// the optimizers <ember/dispatch/optim/*.hpp>; <ember/dispatch/nn.hpp> holds all of them.
#include "../tensor/activation.hpp"
#include "../tensor/display.hpp"
#include "../tensor/module_ops.hpp"
#include "../tensor/tensor.hpp"
#include "../tensor/transaction.hpp"
#include "dispatch.hpp"
#include "instance_lists.hpp"

namespace ember {
#if EMBER_DISPATCH_CLASS_INSTANCES && !defined(EMBER_DISPATCH_INSTANTIATING)
EMBER_DISPATCH_TENSOR_CLASSES(EMBER_DISPATCH_EXTERN_CLASS)
#endif
}  // namespace ember
