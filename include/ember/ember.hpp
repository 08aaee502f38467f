#pragma once
// The umbrella header: the tensor API, activations, functional module ops, display, and the
// backends this build has.
#include "tensor/activation.hpp"
#include "tensor/display.hpp"
#include "tensor/module_ops.hpp"
#include "tensor/tensor.hpp"
#include "backend/cpu.hpp"
#include "autodiff/autodiff.hpp"
#include "stacks.hpp"
