#pragma once
// What src/dispatch/instances_*.cpp expand include/ember/dispatch/nn.hpp's lists with: the
// explicit instantiation definitions, exported (EMBER_API) so that a shared ember_dispatch
// provides what the header declares extern.
#define EMBER_DISPATCH_INSTANTIATING 1
#include "ember/dispatch/nn.hpp"

#define EMBER_DISPATCH_DEFINE_CLASS(...) template class EMBER_API __VA_ARGS__;
#define EMBER_DISPATCH_DEFINE_STRUCT(...) template struct EMBER_API __VA_ARGS__;
#define EMBER_DISPATCH_DEFINE_FUNCTION(...) template EMBER_API __VA_ARGS__;
