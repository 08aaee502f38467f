// Dispatch's Cuda stacks: Cuda, Autodiff<Cuda>, Fusion<Cuda> and
// Autodiff<Fusion<Cuda>>, whose op tables are instantiated here, once (built where
// ember_cuda is).
#include "ember/autodiff/attention.hpp"
#include "ember/backend/cuda.hpp"
#include "ember/backend/cuda_attention.hpp"
#include "ember/fusion/attention.hpp"
#include "ember/stacks.hpp"
#include "table.hpp"

namespace ember::detail::dispatch {

template <>
struct DeviceOf<CudaDevice> {
    static CudaDevice make(const DispatchDevice& d) { return CudaDevice{d.index()}; }
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

BackendEntry cuda_backend() {
    static const StackEntry stacks[4] = {
        make_entry<Cuda>("cuda"), make_entry<Autodiff<Cuda>>("autodiff<cuda>"),
        make_entry<Fusion<Cuda>>("fusion<cuda>"),
        make_entry<Autodiff<Fusion<Cuda>>>("autodiff<fusion<cuda>>")};
    return {stacks, [](std::uint64_t s) { Cuda::seed(s); }};
}

}  // namespace ember::detail::dispatch
