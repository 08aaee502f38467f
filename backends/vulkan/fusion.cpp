// Fusion<Vulkan>'s side of the FusionBackend concept: fused_compile generates a program's GLSL
// (fusion_codegen.cpp); its first launch on a device turns it into SPIR-V — read from the
// on-disk cache, else compiled by shaderc and written there — and a pipeline, both kept in
// memory. Later launches only fill parameters and record one dispatch.
#include <shaderc/shaderc.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "ember/backend/vulkan.hpp"
#include "ember/tensor/fusion_check.hpp"
#include "fusion.hpp"
#include "kernels.hpp"

namespace ember::detail::vk {

namespace {

using fusion::Instr;
using fusion::OpKind;
using fusion::Program;

/// The process-wide state of fused kernels: SPIR-V per device and hash, counters, and a
/// generation that clear_fusion_cache() bumps to invalidate what plans remember.
struct FusedCache {
    std::mutex mu;
    std::uint64_t generation = 1;
    std::map<std::pair<std::uint32_t, std::uint64_t>, std::vector<std::uint32_t>> spirv;
    std::set<std::pair<std::uint32_t, std::uint64_t>> pipelines;
    std::set<std::uint32_t> devices;
    ember::vulkan::FusionCacheStats stats;
    shaderc_compiler_t compiler = nullptr;
};
FusedCache& cache() {
    static FusedCache c;
    return c;
}

std::string hex(std::uint64_t v) {
    char b[17];
    std::snprintf(b, sizeof b, "%016llx", static_cast<unsigned long long>(v));
    return b;
}

// ---- the on-disk format: a header that proves the file whole and for this source ----------
constexpr char kMagic[8] = {'E', 'M', 'B', 'F', 'S', 'P', 'V', '1'};
struct FileHeader {
    char magic[8];
    std::uint64_t source_hash;   ///< the GLSL the words were compiled from
    std::uint64_t source_bytes;  ///< its length (a second check against collisions)
    std::uint64_t words;         ///< SPIR-V words that follow
    std::uint64_t checksum;      ///< FNV-1a of those words
};

bool read_spirv(const std::string& path, const FusedPlan& plan, std::vector<std::uint32_t>& out) {
    std::ifstream f(path, std::ios::binary);
    if (!f) return false;
    FileHeader h{};
    if (!f.read(reinterpret_cast<char*>(&h), sizeof h)) return false;
    if (std::memcmp(h.magic, kMagic, 8) != 0 || h.source_hash != plan.hash ||
        h.source_bytes != plan.source.size() || h.words == 0 || h.words > (64u << 20))
        return false;
    std::vector<std::uint32_t> w(h.words);
    if (!f.read(reinterpret_cast<char*>(w.data()), static_cast<std::streamsize>(h.words * 4)))
        return false;
    if (f.peek() != std::char_traits<char>::eof()) return false;  // trailing bytes
    if (w[0] != 0x07230203u || fnv1a(w.data(), w.size() * 4) != h.checksum) return false;
    out = std::move(w);
    return true;
}

void write_spirv(const std::string& dir, const std::string& path, const FusedPlan& plan,
                 const std::vector<std::uint32_t>& w) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    FileHeader h{};
    std::memcpy(h.magic, kMagic, 8);
    h.source_hash = plan.hash;
    h.source_bytes = plan.source.size();
    h.words = w.size();
    h.checksum = fnv1a(w.data(), w.size() * 4);
    static std::atomic<unsigned> serial{0};
    const std::string tmp =
        path + ".tmp" + std::to_string(::getpid()) + "-" + std::to_string(serial++);
    {
        std::ofstream f(tmp, std::ios::binary);
        if (!f) return;  // an unwritable cache directory only costs compile time
        f.write(reinterpret_cast<const char*>(&h), sizeof h);
        f.write(reinterpret_cast<const char*>(w.data()),
                static_cast<std::streamsize>(w.size() * 4));
        if (!f) {
            f.close();
            std::filesystem::remove(tmp, ec);
            return;
        }
    }
    std::filesystem::rename(tmp, path, ec);  // atomic: readers never see half a file
    if (ec) {
        std::filesystem::remove(tmp, ec);
        return;
    }
    ++cache().stats.disk_writes;
}

std::vector<std::uint32_t> compile_spirv(const FusedPlan& plan) {
    FusedCache& c = cache();
    if (!c.compiler) c.compiler = shaderc_compiler_initialize();
    EMBER_CHECK(c.compiler, Device, "vulkan fusion: shaderc could not be initialised");
    shaderc_compile_options_t opt = shaderc_compile_options_initialize();
    shaderc_compile_options_set_target_env(opt, shaderc_target_env_vulkan,
                                           shaderc_env_version_vulkan_1_2);
    shaderc_compile_options_set_optimization_level(opt, shaderc_optimization_level_performance);
    shaderc_compilation_result_t r =
        shaderc_compile_into_spv(c.compiler, plan.source.data(), plan.source.size(),
                                 shaderc_compute_shader, "fused.comp", "main", opt);
    shaderc_compile_options_release(opt);
    const bool ok = shaderc_result_get_compilation_status(r) == shaderc_compilation_status_success;
    std::vector<std::uint32_t> words;
    std::string msg;
    if (ok) {
        const auto* b = reinterpret_cast<const std::uint32_t*>(shaderc_result_get_bytes(r));
        words.assign(b, b + shaderc_result_get_length(r) / 4);
    } else {
        msg = shaderc_result_get_error_message(r);
    }
    shaderc_result_release(r);
    EMBER_CHECK(ok, Generic, "vulkan fusion: the generated kernel does not compile (", msg,
                "); program:\n", plan.program.to_string(),
                "\n(EMBER_FUSION_DUMP=1 prints the GLSL)");
    ++c.stats.spirv_compiled;
    return words;
}

/// The pipeline of `plan` on `cx`: remembered by the plan per device;
/// else SPIR-V from memory, disk or shaderc, and a new pipeline.
const Pipeline& pipeline_for(const FusedPlan& plan, Context& cx) {
    std::lock_guard plan_lock(plan.mu);
    FusedCache& c = cache();
    std::lock_guard cache_lock(c.mu);
    const std::uint32_t dev = cx.index();
    if (plan.pipelines.size() <= dev) plan.pipelines.resize(dev + 1, {nullptr, 0});
    auto& slot = plan.pipelines[dev];
    if (slot.first && slot.second == c.generation) return *slot.first;

    const std::pair<std::uint32_t, std::uint64_t> id{dev, plan.hash};
    auto it = c.spirv.find(id);
    if (it == c.spirv.end()) {
        std::vector<std::uint32_t> words;
        const std::string path = cx.cache_file("fused-" + hex(plan.hash) + ".spv");
        const bool present = std::filesystem::exists(path);
        if (present && read_spirv(path, plan, words)) {
            ++c.stats.disk_loads;
        } else {
            if (present) ++c.stats.disk_rejected;  // corrupt or foreign: compiled and rewritten
            words = compile_spirv(plan);
            write_spirv(cx.cache_dir(), path, plan, words);
        }
        c.stats.last_file = path;
        it = c.spirv.emplace(id, std::move(words)).first;
    }
    c.devices.insert(dev);
    const Pipeline& pipe = cx.pipeline_spirv(
        "fused:" + hex(plan.hash), it->second,
        static_cast<std::uint32_t>(plan.program.outputs.size() + plan.program.inputs.size() +
                                   (plan.program.reduce ? 1u : 0u)),
        kFusedLocal, plan.layout.push_words * 4);
    if (c.pipelines.insert(id).second) ++c.stats.pipelines;
    slot = {&pipe, c.generation};
    return pipe;
}

/// A program with more buffers than one kernel may bind runs op by op on the unfused kernels
/// (the same element functions, so the same values).
std::vector<VT> interpret(const Program& p, const std::vector<VT>& inputs,
                          std::span<const Scalar> sc) {
    std::vector<VT> r(inputs.begin(), inputs.end());
    for (const Instr& in : p.instrs) {
        const DType da = p.reg_dtype(in.a);
        switch (in.kind) {
            case OpKind::Unary:
                r.push_back(unary(static_cast<UnaryOp>(in.code), r[in.a]));
                break;
            case OpKind::Binary:
                r.push_back(binary(static_cast<BinaryOp>(in.code), r[in.a], r[in.b]));
                break;
            case OpKind::BinaryScalar:
                r.push_back(binary_scalar(static_cast<BinaryOp>(in.code), r[in.a], sc[in.s0]));
                break;
            case OpKind::Compare:
                r.push_back(compare(static_cast<CompareOp>(in.code), r[in.a], r[in.b]));
                break;
            case OpKind::CompareScalar:
                r.push_back(compare_scalar(static_cast<CompareOp>(in.code), r[in.a], sc[in.s0]));
                break;
            case OpKind::Where:
                r.push_back(where(r[in.a], r[in.b], r[in.c]));
                break;
            case OpKind::MaskFill:
                r.push_back(mask_fill(r[in.a], r[in.b], sc[in.s0]));
                break;
            case OpKind::Clamp:
                r.push_back(clamp(r[in.a], sc[in.s0], sc[in.s1]));
                break;
            case OpKind::Cast:
                r.push_back(da == in.dtype ? r[in.a] : cast(r[in.a], in.dtype));
                break;
        }
    }
    std::vector<VT> outs;
    for (auto o : p.outputs) outs.push_back(r[o]);
    if (p.reduce) {
        const VT& x = r[p.reduce->reg];
        outs.push_back(VulkanBackend::float_reduce_dim(p.reduce->op, x, x.shape.rank() - 1));
    }
    return outs;
}

void put_scalar(std::vector<std::uint32_t>& w, std::size_t at, ScalarKind k, const Scalar& s) {
    if (k == ScalarKind::F32) {
        const float f = static_cast<float>(s.f);
        std::memcpy(&w[at], &f, 4);
    } else if (k == ScalarKind::I64) {
        const auto u = static_cast<std::uint64_t>(s.i);
        w[at] = static_cast<std::uint32_t>(u);
        w[at + 1] = static_cast<std::uint32_t>(u >> 32);
    } else {
        w[at] = (s.i != 0 || s.f != 0.0) ? 1u : 0u;
    }
}

std::vector<VT> fused_launch(const FusedPlan& plan, std::vector<VT> inputs,
                             std::span<const Scalar> sc, const Shape& shape) {
    const Program& p = plan.program;
    const FusedLayout& l = plan.layout;
    const std::size_t n_in = p.inputs.size();
    EMBER_CHECK(inputs.size() == n_in, Argument, "fused program: ", n_in, " inputs expected, got ",
                inputs.size());
    EMBER_CHECK(sc.size() >= l.scalar_kinds.size(), Argument,
                "fused program: ", l.scalar_kinds.size(), " scalars expected, got ", sc.size());
    EMBER_CHECK(shape.rank() == p.rank, Shape, "fused program of rank ", p.rank, " launched over ",
                shape.to_string());
    for (std::size_t k = 0; k < n_in; ++k) {
        const VT& t = inputs[k];
        EMBER_CHECK(t.shape == shape && t.dtype == p.inputs[k].dtype, Shape,
                    "fused program: input ", k, " is ", t.shape.to_string(), " ",
                    dtype_name(t.dtype), ", expected ", shape.to_string(), " ",
                    dtype_name(p.inputs[k].dtype));
        EMBER_CHECK(t.device == inputs[0].device, Device,
                    "fused program: operands on different Vulkan devices (", inputs[0].device,
                    " and ", t.device, ")");
        EMBER_CHECK(!p.inputs[k].dense || t.is_contiguous(), Argument, "fused program: input ", k,
                    " was compiled as dense but is strided");
    }
    if (plan.interpreted) return interpret(p, inputs, sc);
    const std::uint32_t dev = inputs[0].device;
    std::vector<VT> outs;
    for (auto o : p.outputs) outs.push_back(empty(shape, p.reg_dtype(o), dev));
    const std::size_t n = shape.num_elements();
    std::size_t cols = 0;
    if (p.reduce) {
        cols = shape[shape.rank() - 1];
        outs.push_back(empty(ember::fusion::reduced_shape(shape), DType::F32, dev));
    }
    if (n == 0) return outs;

    std::vector<std::uint32_t> words(l.params_words ? l.params_words : 1, 0u);
    std::vector<std::uint32_t> push(l.push_words, 0u);
    bool vec = l.all_dense && n >= 4;
    for (std::size_t k = 0; k < n_in; ++k) {
        const VT& t = inputs[k];
        words[k] = static_cast<std::uint32_t>(static_cast<std::int32_t>(t.offset));
        vec = vec && t.offset % (t.dtype == DType::I64 ? 2 : 4) == 0;  // 16-byte aligned
        if (l.strided[k])
            for (std::size_t d = 0; d < p.rank; ++d)
                words[l.stride_word[k] + d] = static_cast<std::uint32_t>(
                    static_cast<std::int32_t>(shape[d] == 1 ? 0 : t.strides[d]));
    }
    for (std::size_t d = 0; d < p.rank; ++d)
        words[l.shape_word + d] = static_cast<std::uint32_t>(shape[d]);
    auto& sw = l.scalars_in_push ? push : words;
    for (std::size_t s = 0; s < l.scalar_kinds.size(); ++s)
        put_scalar(sw, l.scalar_word[s] + (l.scalars_in_push ? 2 : 0), l.scalar_kinds[s], sc[s]);
    push[0] = static_cast<std::uint32_t>(n);
    push[1] = p.reduce ? static_cast<std::uint32_t>(cols) : vec ? 1u : 0u;

    // Enough threads to cover the work once (grid-stride beyond 2^16 workgroups); a workgroup
    // a row when a reduction ends the program.
    const std::uint64_t items = vec ? n / 4 : n;
    const std::uint64_t groups =
        p.reduce ? std::min<std::uint64_t>(n / cols, std::uint64_t{1} << 16)
                 : std::min<std::uint64_t>((items + kFusedLocal - 1) / kFusedLocal,
                                           std::uint64_t{1} << 16);
    std::vector<Binding> binds;
    binds.reserve(outs.size() + n_in);
    for (const VT& o : outs) binds.push_back(bind(o, true));
    for (const VT& t : inputs) binds.push_back(bind(t, false));
    Context& cx = Context::get(dev);
    const Pipeline& pipe = pipeline_for(plan, cx);
    cx.dispatch(pipe, binds,
                std::span(reinterpret_cast<const std::int32_t*>(words.data()), words.size()),
                groups, push);
    return outs;
}

}  // namespace

}  // namespace ember::detail::vk

namespace ember {

namespace k = detail::vk;

VulkanBackend::FusedKernel VulkanBackend::fused_compile(const fusion::Program& program) {
    auto plan = std::make_shared<k::FusedPlan>();
    plan->program = program;
    // Programs past the buffer limit, and reductions of f64 (the kernels reduce f32), run op
    // by op on the unfused kernels.
    const bool f64_reduce = program.reduce && program.reg_dtype(program.reduce->reg) != DType::F32;
    plan->interpreted = program.inputs.size() + program.outputs.size() + (program.reduce ? 1 : 0) >
                            k::kMaxFusedBuffers ||
                        f64_reduce;
    plan->source = k::generate_glsl(program, plan->layout);  // checks the program too
    plan->hash = k::fnv1a(plan->source.data(), plan->source.size());
    if (plan->interpreted) plan->source.clear();
    if (const char* e = std::getenv("EMBER_FUSION_DUMP"); e && std::string(e) == "1") {
        // The generated part only: shaders/common.glsl comes first in the real source.
        const std::string& src = plan->source;
        const auto at = src.find("// ---- fused program ----");
        std::fprintf(stderr, "ember fusion (vulkan): kernel %s\n%s\n%s\n",
                     k::hex(plan->hash).c_str(), program.to_string().c_str(),
                     plan->interpreted ? "(too many buffers: runs op by op)"
                                       : src.substr(at == std::string::npos ? 0 : at).c_str());
    }
    return plan;
}

std::vector<VulkanBackend::FT> VulkanBackend::fused_launch(const FusedKernel& kernel,
                                                           const fusion::Program&,
                                                           std::vector<FT> inputs,
                                                           std::span<const Scalar> scalars,
                                                           const Shape& shape) {
    return k::fused_launch(*kernel, std::move(inputs), scalars, shape);
}

namespace vulkan {

FusionCacheStats fusion_cache_stats() {
    auto& c = k::cache();
    std::lock_guard lock(c.mu);
    return c.stats;
}

void clear_fusion_cache(bool remove_files) {
    auto& c = k::cache();
    std::lock_guard lock(c.mu);
    if (remove_files && is_available()) c.devices.insert(VulkanDevice{}.resolved());
    // The plans' remembered pipelines belong to the old generation: each plan looks its
    // pipeline up again after its SPIR-V. The devices keep the pipelines themselves (the same
    // source hash names the same pipeline, and work in flight may still use them), so
    // `pipelines` keeps counting only those created.
    ++c.generation;
    c.spirv.clear();
    if (!remove_files) return;
    for (const std::uint32_t d : c.devices) {
        const k::Context& cx = k::Context::get(d);
        const std::string prefix = cx.cache_file("fused-");
        std::error_code ec;
        for (const auto& e : std::filesystem::directory_iterator(cx.cache_dir(), ec))
            if (e.path().string().compare(0, prefix.size(), prefix) == 0)
                std::filesystem::remove(e.path(), ec);
    }
}

std::string cache_directory(const VulkanDevice& d) {
    return k::Context::get(d.resolved()).cache_dir();
}

}  // namespace vulkan

}  // namespace ember
