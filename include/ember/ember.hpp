#pragma once
// The umbrella header: the tensor API, activations, functional module ops, display, and the
// backends this build has.
#include "tensor/activation.hpp"
#if !EMBER_FREESTANDING  // firmware prints no tensors: no <ostream>
#include "tensor/display.hpp"
#endif
#include "tensor/module_ops.hpp"
#include "tensor/tensor.hpp"
#include "tensor/transaction.hpp"
#include "quant/tensor.hpp"
#include "backend/cpu.hpp"
#include "autodiff/autodiff.hpp"
#include "stacks.hpp"
