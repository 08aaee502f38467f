#pragma once
// The data layer (Burn's burn::data): datasets, their transformations, SQLite storage and the
// data loader. Link ember::data.
#include "data/dataloader.hpp"
#include "data/dataset.hpp"
#include "data/sqlite.hpp"
#include "data/text.hpp"
#include "data/transform.hpp"
#include "data/vision.hpp"
