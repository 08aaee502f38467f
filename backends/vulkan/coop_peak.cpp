// ember::vulkan::cooperative_matrix_peak: the rate of the tensor cores through cooperative
// matrices with no memory traffic (shaders/coop_peak.comp), the ceiling against which the
// 16-bit matmul's figures are read (bench_vulkan coop-peak).
#include <algorithm>
#include <bit>
#include <chrono>

#include "ember/backend/vulkan.hpp"
#include "kernels.hpp"

namespace ember::vulkan {

double cooperative_matrix_peak(DType dtype, int fragment_columns, bool from_shared,
                               const VulkanDevice& d) {
    namespace k = detail::vk;
    k::Context& cx = k::Context::get(d.resolved());
    const k::DeviceInfo& info = cx.info();
    EMBER_CHECK(dtype == DType::F16 || dtype == DType::BF16, DType,
                "cooperative_matrix_peak: f16 or bf16, got ", dtype_name(dtype));
    EMBER_CHECK(fragment_columns == 8 || fragment_columns == 16, Argument,
                "cooperative_matrix_peak: fragments of 8 or 16 columns, got ", fragment_columns);
    const bool bf16 = dtype == DType::BF16;
    const bool ok = bf16 ? info.coop_bf16 && fragment_columns == 16
                         : info.cooperative_matrix && (fragment_columns == 8 || info.coop_f16_n16);
    EMBER_CHECK(ok, Device, "cooperative_matrix_peak: device ", info.name, " has no ",
                dtype_name(dtype), " cooperative matrices of 16 x ", fragment_columns, " x 16");
    // 8 subgroups a workgroup, 16 workgroups for each of up to 132 multiprocessors: many more
    // subgroups than the tensor cores can hold at once. From registers, 4 x 4 accumulators a
    // subgroup; from shared memory, a 64 x 64 piece (4 x 64 / fn), as the matmul's subgroups.
    constexpr std::int32_t kIters = 4096, kTm = 4, kSubgroups = 8;
    constexpr std::uint64_t kGroups = 132 * 16;
    const std::int32_t fn = fragment_columns, tn = from_shared ? 64 / fn : 4;
    // Inputs: ones (0x3c00 in f16, 0x3f80 in bf16), enough for every fragment.
    const std::uint32_t one = bf16 ? 0x3f80u : 0x3c00u;
    const float pair = std::bit_cast<float>(one | one << 16);
    k::VT in = k::full(Shape{256}, Scalar(pair), DType::F32, cx.index());
    k::VT out = k::empty(Shape{kGroups * kSubgroups * kTm * tn * 16 * std::uint64_t(fn)},
                         DType::F32, cx.index());
    const char* shader = info.coop != k::DeviceInfo::Coop::Khr ? "coop_peak"
                         : bf16                                ? "coop_peak@khr_bf16"
                                                               : "coop_peak@khr";
    const std::int32_t spec[] = {fn, kIters, kTm, tn, from_shared ? 1 : 0};
    const k::Pipeline& pipe = cx.pipeline(shader, spec, 2, kSubgroups * 32);
    const k::Binding bs[] = {k::bind(out, true), k::bind(in, false)};
    const std::int32_t params[] = {0};
    auto run = [&] {
        cx.dispatch(pipe, bs, params, kGroups);
        cx.wait_idle();
    };
    run();  // pipeline creation and clocks up
    double best = 1e30;
    for (int r = 0; r < 5; ++r) {
        const auto t0 = std::chrono::steady_clock::now();
        run();
        best = std::min(
            best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    const double flops = 2.0 * kGroups * kSubgroups * kIters * kTm * tn * 16.0 * fn * 16.0;
    return flops / best / 1e12;
}

}  // namespace ember::vulkan
