#pragma once
// Everything of ember on ember::Dispatch in one include: the tensor layer, every module, loss
// and optimizer, with the Dispatch instances that ember_dispatch compiles once
// (src/dispatch/instances_*.cpp) declared extern, so a file that writes a model against
// Dispatch does not compile them again.
//
//     #include <ember/dispatch/nn.hpp>   // instead of ember.hpp + nn.hpp + optim.hpp
//
// It parses every module and optimizer header and the concrete stacks of <ember/ember.hpp>. A
// file that should compile fast includes only the parts it uses, as fmt's users include
// <fmt/core.h>: <ember/dispatch/tensor.hpp> for tensors, <ember/dispatch/module.hpp> for the
// module layer, and the Dispatch header of each module and optimizer header it uses
// (<ember/dispatch/nn/linear.hpp> for <ember/nn/linear.hpp>, <ember/dispatch/optim/adam.hpp>
// for <ember/optim/adam.hpp>); each declares its module's instances extern
// (<ember/dispatch/instance_lists.hpp> lists them).
#include "../ember.hpp"
#include "../nn.hpp"
#include "../optim.hpp"
#include "dispatch.hpp"
#include "module.hpp"
#include "nn/activation_modules.hpp"
#include "nn/activations.hpp"
#include "nn/attention.hpp"
#include "nn/conv.hpp"
#include "nn/dropout.hpp"
#include "nn/embedding.hpp"
#include "nn/linear.hpp"
#include "nn/loss.hpp"
#include "nn/norm.hpp"
#include "nn/pool.hpp"
#include "nn/rnn.hpp"
#include "nn/transformer.hpp"
#include "optim/adam.hpp"
#include "optim/gradients_params.hpp"
#include "optim/sgd.hpp"
#include "tensor.hpp"
