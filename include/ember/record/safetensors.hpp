#pragma once
// safetensors files (Hugging Face's format, what most published weights come in): an 8-byte
// little-endian header length, a JSON header naming each tensor's dtype, shape and byte range,
// and the tensors' bytes, little-endian and contiguous, with no holes between them. Reading
// checks every one of those promises, so a truncated, corrupted or hostile file gives a
// FormatError naming the file and the tensor instead of a crash or a wrong tensor.
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "../export.hpp"
#include "../tensor/data.hpp"

namespace ember::record {

/// The contents of a safetensors file, in file order.
struct EMBER_API SafetensorsFile {
    std::vector<std::pair<std::string, TensorData>> tensors;    ///< name → tensor
    std::vector<std::pair<std::string, std::string>> metadata;  ///< the "__metadata__" strings

    /// The tensor called `name`, or nullptr.
    const TensorData* find(std::string_view name) const;
};

/// The bytes of a safetensors file holding `file`. Throws ArgumentError for a name used twice,
/// the reserved name "__metadata__", or a dtype the format has no code for.
EMBER_API std::vector<std::byte> encode_safetensors(const SafetensorsFile& file);
/// The contents of safetensors `bytes`; `source` names them in errors (FormatError). Tensors of
/// dtypes ember has no counterpart for (F8, U16, U32, U64) are refused, naming the tensor.
EMBER_API SafetensorsFile decode_safetensors(std::span<const std::byte> bytes,
                                             std::string_view source = "safetensors bytes");
/// Writes `file` to `path` atomically (a temporary file renamed over it).
EMBER_API void save_safetensors(const SafetensorsFile& file, const std::filesystem::path& path);
/// Reads the safetensors file at `path`; FormatError naming it when missing or malformed.
EMBER_API SafetensorsFile load_safetensors(const std::filesystem::path& path);

}  // namespace ember::record
