#pragma once
// The module layer: EMBER_MODULE/EMBER_CONFIG, parameters, every built-in layer and loss, and
// module quantization (quantize_weights, calibration).
// Kept out of <ember/ember.hpp> so that tensor-only code compiles fast.
#include "module/config.hpp"
#include "module/module.hpp"
#include "nn/activations.hpp"
#include "nn/attention.hpp"
#include "nn/conv.hpp"
#include "nn/dropout.hpp"
#include "nn/embedding.hpp"
#include "nn/initializer.hpp"
#include "nn/interpolate.hpp"
#include "nn/linear.hpp"
#include "nn/loss.hpp"
#include "nn/norm.hpp"
#include "nn/padding.hpp"
#include "nn/pool.hpp"
#include "nn/positional.hpp"
#include "nn/rnn.hpp"
#include "nn/transformer.hpp"
#include "quant/module.hpp"
#include "record.hpp"
