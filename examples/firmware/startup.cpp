// The Cortex-M start-up: a vector table (initial stack pointer, reset and fault handlers) and a
// reset handler that switches the FPU on before newlib's crt0 (`_start`) runs the C++ start-up
// and main. Faults end the run through semihosting with exit status 3, so a crash fails the
// test instead of hanging qemu.
#include <cstdint>
#include <cstdlib>

extern "C" {
void _start();
extern std::uint32_t __StackTop;
[[noreturn]] void Reset_Handler();
[[noreturn]] void Fault_Handler();
}

void Reset_Handler() {
#if defined(__ARM_FP)
    // CPACR: full access to coprocessors 10 and 11 (the FPU); compiled code uses it at once.
    *reinterpret_cast<volatile std::uint32_t*>(0xE000ED88) |= 0xFu << 20;
    __asm volatile("dsb\n\tisb" ::: "memory");
#endif
    _start();
    for (;;) {
    }
}

void Fault_Handler() {
    std::_Exit(3);
}

// Initial SP, reset, NMI, HardFault, MemManage, BusFault, UsageFault, SecureFault (M33).
extern "C" __attribute__((section(".vectors"), used)) void* const g_vectors[16] = {
    &__StackTop,
    reinterpret_cast<void*>(Reset_Handler),
    reinterpret_cast<void*>(Fault_Handler),
    reinterpret_cast<void*>(Fault_Handler),
    reinterpret_cast<void*>(Fault_Handler),
    reinterpret_cast<void*>(Fault_Handler),
    reinterpret_cast<void*>(Fault_Handler),
    reinterpret_cast<void*>(Fault_Handler),
};
