#pragma once
// What every fuzz target shares. A target is one function of the input bytes, written once with
// EMBER_FUZZ_TARGET(name) in tests/fuzz/fuzz_<name>.cpp, and compiled two ways:
//
// - for libFuzzer (tests/fuzz/CMakeLists.txt, clang, sanitizers): the function becomes
//   LLVMFuzzerTestOneInput, and a crash, a sanitizer report, a leak, a timeout or an allocation
//   over the limit is a finding;
// - into the normal test suite (EMBER_FUZZ_REPLAY, tests/test_fuzz_regressions.cpp): the function
//   is registered under its name, and the test replays every committed seed and reproducer
//   (tests/fuzz/corpus/<name>, tests/fuzz/crashes/<name>) through it.
//
// Hostile bytes must either parse or be refused with an ember::Error; any other exception escapes
// the target and counts as a finding too.
#include <ember/record/untrusted.hpp>
#include <ember/tensor/error.hpp>

#include <unistd.h>
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>

namespace ember::fuzz {

/// One input of a fuzz target.
using Input = std::span<const std::byte>;
/// A fuzz target's function.
using Target = void (*)(Input);

/// The targets compiled into this program, by name (replay builds only).
inline std::map<std::string, Target>& registry() {
    static std::map<std::string, Target> targets;
    return targets;
}

/// Registers a target at static initialisation (replay builds only).
struct Register {
    /// Adds `target` to registry() under `name`.
    Register(const char* name, Target target) { registry().emplace(name, target); }
};

/// Runs `f`; an ember::Error is the expected refusal of a hostile input and is swallowed.
template <class F>
void refused_or_fine(F&& f) {
    try {
        f();
    } catch (const ember::Error&) {
    }
}

/// Takes bytes from the front of an input: the targets that need several parts or a choice of
/// mode read them with this, so that the fuzzer's mutations reach each part.
class Reader {
  public:
    /// Reads from `input`.
    explicit Reader(Input input) : rest_(input) {}
    /// The next byte, or 0 when none is left.
    std::uint8_t byte() {
        if (rest_.empty()) return 0;
        const auto b = std::to_integer<std::uint8_t>(rest_[0]);
        rest_ = rest_.subspan(1);
        return b;
    }
    /// The next two bytes as a little-endian number (missing bytes read as 0).
    std::uint16_t u16() {
        const std::uint16_t lo = byte();
        return static_cast<std::uint16_t>(lo | (std::uint16_t{byte()} << 8));
    }
    /// The next `n` bytes, or fewer when fewer are left.
    Input take(std::size_t n) {
        n = std::min(n, rest_.size());
        const Input out = rest_.first(n);
        rest_ = rest_.subspan(n);
        return out;
    }
    /// Everything not read yet.
    Input rest() const { return rest_; }

  private:
    Input rest_;
};

/// The bytes as text.
inline std::string_view as_text(Input bytes) {
    return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

/// A directory of this process's own for the targets whose parser reads files (removed at exit;
/// a crashing run leaves it behind). In /dev/shm where there is one: on a disk, rewriting a
/// truncated file makes ext4 flush it, which costs the file targets 90% of their speed.
inline const std::filesystem::path& scratch_dir() {
    struct Dir {
        std::filesystem::path path;
        Dir() {
            std::error_code ec;
            const bool shm =
                std::filesystem::is_directory("/dev/shm", ec) && ::access("/dev/shm", W_OK) == 0;
            path =
                (shm ? std::filesystem::path("/dev/shm") : std::filesystem::temp_directory_path()) /
                ("ember-fuzz-" + std::to_string(::getpid()));
            std::filesystem::create_directories(path);
        }
        ~Dir() {
            std::error_code ec;
            std::filesystem::remove_all(path, ec);
        }
    };
    static const Dir dir;
    return dir.path;
}

/// Writes `bytes` to `path` (replacing it); the harness's own failure to write throws.
inline void write_file(const std::filesystem::path& path, Input bytes) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(bytes.data()),
              static_cast<std::streamsize>(bytes.size()));
    out.close();
    if (!out) throw std::runtime_error("fuzz harness: cannot write " + path.string());
}

}  // namespace ember::fuzz

#if EMBER_FUZZ_REPLAY
/// Defines fuzz target `name`: the body that follows sees the bytes as `input`.
#define EMBER_FUZZ_TARGET(name)                                                                \
    static void ember_fuzz_##name(::ember::fuzz::Input input);                                 \
    static const ::ember::fuzz::Register ember_fuzz_register_##name(#name, ember_fuzz_##name); \
    static void ember_fuzz_##name(::ember::fuzz::Input input)
#else
namespace ember::fuzz {
/// The read limits of the fuzzing runs: ember's defaults let any file decode to 256 MiB
/// whatever its size (expansion_floor), and decoding that much under the sanitizers takes
/// longer than libFuzzer's timeout (a 140-byte TGA of 6168x6168 pixels: 13 s). The fuzzer looks
/// for bugs in the parsing, so it runs with a floor of 16 MiB; the limits themselves are tested
/// in the normal suite.
inline void set_fuzzing_limits() {
    record::ReadLimits limits = record::read_limits();
    limits.expansion_floor = std::uint64_t{16} << 20;
    limits.max_bytes = std::uint64_t{1} << 30;
    record::set_read_limits(limits);
}
}  // namespace ember::fuzz
   /// Defines fuzz target `name`: the body that follows sees the bytes as `input`.
#define EMBER_FUZZ_TARGET(name)                                                         \
    static void ember_fuzz_##name(::ember::fuzz::Input input);                          \
    extern "C" int LLVMFuzzerInitialize(int*, char***) {                                \
        ::ember::fuzz::set_fuzzing_limits();                                            \
        return 0;                                                                       \
    }                                                                                   \
    extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) { \
        ember_fuzz_##name(std::as_bytes(std::span(data, size)));                        \
        return 0;                                                                       \
    }                                                                                   \
    static void ember_fuzz_##name(::ember::fuzz::Input input)
#endif
