#pragma once
// Internal to the PyTorch reader: how its errors name the file.
#include <string>

#include "ember/record/untrusted.hpp"
#include "ember/tensor/error.hpp"

namespace ember::record::detail::pt {

/// The file being read, so that every error names it: "<name>: PyTorch file: <why>".
struct Source {
    std::string name;  ///< the path, or what the caller called the bytes

    /// Throws FormatError with the reason built from `why`.
    template <typename... Args>
    [[noreturn]] void fail(const Args&... why) const {
        EMBER_FAIL(Format, printable(name, 4096), ": PyTorch file: ", why...);
    }
};

}  // namespace ember::record::detail::pt
