// The run-time choice of the NEON kernels (neon.hpp).
#include "neon.hpp"

#if EMBER_CPU_NEON && defined(__linux__) && !EMBER_FREESTANDING
#include <sys/auxv.h>
#endif
#if EMBER_CPU_NEON && !EMBER_FREESTANDING
#include <cstdlib>
#include <cstring>
#endif

namespace ember::detail::cpu {

bool neon_enabled() {
#if EMBER_CPU_NEON
    static const bool yes = [] {
#if !EMBER_FREESTANDING
        if (const char* e = std::getenv("EMBER_CPU_NEON"))
            if (std::strcmp(e, "0") == 0 || std::strcmp(e, "off") == 0) return false;
#endif
#if defined(__linux__) && !EMBER_FREESTANDING && defined(HWCAP_ASIMD)
        return (getauxval(AT_HWCAP) & HWCAP_ASIMD) != 0;
#else
        return true;  // AdvSIMD is part of ARMv8-A, and the compiler was told the target has it
#endif
    }();
    return yes;
#else
    return false;
#endif
}

}  // namespace ember::detail::cpu
