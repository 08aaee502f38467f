#pragma once
// The record layer: the record tree, Serde for any type, and every recorder.
#include "record/recorder.hpp"
#include "record/serde.hpp"
#include "record/untrusted.hpp"
#include "record/value.hpp"
