#pragma once
// What src/dispatch/instances_*.cpp expand the lists of include/ember/dispatch/instance_lists.hpp
// with: the explicit instantiation definitions, exported (EMBER_API) so that a shared
// ember_dispatch provides what the headers of include/ember/dispatch/ declare extern.
#define EMBER_DISPATCH_INSTANTIATING 1
#include "ember/dispatch/nn.hpp"

#define EMBER_DISPATCH_DEFINE_CLASS(...) template class EMBER_API __VA_ARGS__;
#define EMBER_DISPATCH_DEFINE_STRUCT(...) template struct EMBER_API __VA_ARGS__;
#define EMBER_DISPATCH_DEFINE_FUNCTION(...) template EMBER_API __VA_ARGS__;
