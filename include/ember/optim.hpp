#pragma once
// Optimizers, gradient clipping and accumulation, and learning-rate schedulers.
#include "optim/accumulator.hpp"
#include "optim/adagrad.hpp"
#include "optim/adam.hpp"
#include "optim/adan.hpp"
#include "optim/gradients_params.hpp"
#include "optim/lbfgs.hpp"
#include "optim/lr_scheduler.hpp"
#include "optim/lr_scheduler_compose.hpp"
#include "optim/muon.hpp"
#include "optim/optimizer.hpp"
#include "optim/rmsprop.hpp"
#include "optim/sgd.hpp"
