// Dispatch's CPU stacks: Cpu, Autodiff<Cpu>, Fusion<Cpu> and Autodiff<Fusion<Cpu>>, whose op
// tables are instantiated here, once (the decorators themselves are ember_cpu's). Cpu and
// Autodiff<Cpu> carry the CPU's fused attention (AttentionKernel); the Fusion stacks compose it.
#include "ember/autodiff/attention.hpp"
#include "ember/backend/cpu.hpp"
#include "ember/stacks.hpp"
#include "table.hpp"

namespace ember::detail::dispatch {

template <>
struct DeviceOf<CpuDevice> {
    static CpuDevice make(const DispatchDevice&) { return {}; }
};

namespace {
template <typename S>
StackEntry make_entry(const char* name) {
    static const OpTable ops = make_op_table<S>();
    table_of<S> = &ops;
    static const CoreTable core = make_core_table<S>(name);
    return {&ops, &core};
}
}  // namespace

BackendEntry cpu_backend() {
    static const StackEntry stacks[4] = {
        make_entry<Cpu>("cpu"), make_entry<Autodiff<Cpu>>("autodiff<cpu>"),
        make_entry<Fusion<Cpu>>("fusion<cpu>"),
        make_entry<Autodiff<Fusion<Cpu>>>("autodiff<fusion<cpu>>")};
    return {stacks, [](std::uint64_t s) { Cpu::seed(s); }};
}

}  // namespace ember::detail::dispatch
