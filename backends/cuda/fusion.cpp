// Fusion<Cuda>: a fused program's generated CUDA C++ (fusion_codegen.cpp) compiled by NVRTC for
// the device's architecture — CUBIN where NVRTC knows the architecture, PTX for the newest one
// it knows otherwise (the driver finishes it) — loaded through the driver API and launched on
// the device's stream. The library links no libcuda: the driver's entry points come from the
// runtime (cudaGetDriverEntryPointByVersion) at the first launch, so it loads on machines
// without a driver (launch.hpp). Compiled images are kept in memory (per program and device) and on
// disk, keyed by the source, the architecture and the NVRTC and driver versions.
#include <cuda.h>
#include <nvrtc.h>

#include <unistd.h>
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <optional>
#include <sstream>

#include "ember/backend/cuda.hpp"
#include "ember/detail/hash.hpp"
#include "ember/tensor/fusion_check.hpp"
#include "fusion.hpp"
#include "launch.hpp"
#include "runtime.hpp"

namespace ember {
namespace k = detail::cuda;

namespace detail::cuda {
namespace {

std::atomic<std::size_t> g_compiles{0}, g_disk_hits{0}, g_loads{0};

void check_nvrtc(nvrtcResult r, const char* call, const std::string& log = {}) {
    if (r == NVRTC_SUCCESS) [[likely]]
        return;
    EMBER_FAIL(Device, "NVRTC error in ", call, ": ", nvrtcGetErrorString(r),
               log.empty() ? std::string() : "\n" + log);
}

// ---- NVRTC ---------------------------------------------------------------------------------
std::vector<int> supported_archs() {
    int n = 0;
    check_nvrtc(nvrtcGetNumSupportedArchs(&n), "nvrtcGetNumSupportedArchs");
    std::vector<int> a(static_cast<std::size_t>(n));
    if (n > 0) check_nvrtc(nvrtcGetSupportedArchs(a.data()), "nvrtcGetSupportedArchs");
    return a;
}

/// What NVRTC builds for a device of compute capability `arch`: the architecture and whether
/// it is a CUBIN (exact match) or PTX for the newest older one.
std::pair<int, bool> target_for(int arch) {
    const auto archs = supported_archs();
    if (std::find(archs.begin(), archs.end(), arch) != archs.end()) return {arch, true};
    int best = 0;
    for (int a : archs)
        if (a <= arch) best = std::max(best, a);
    EMBER_CHECK(best > 0, Device, "NVRTC supports no architecture at or below sm_", arch);
    return {best, false};
}

std::string nvrtc_version() {
    int ma = 0, mi = 0;
    check_nvrtc(nvrtcVersion(&ma, &mi), "nvrtcVersion");
    return std::to_string(ma) + "." + std::to_string(mi);
}

// ---- the on-disk cache ---------------------------------------------------------------------

std::filesystem::path cache_dir() {
    std::string base;
    if (const char* e = std::getenv("EMBER_CACHE_DIR"); e && *e)
        base = e;
    else if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x)
        base = std::string(x) + "/ember";
    else if (const char* h = std::getenv("HOME"); h && *h)
        base = std::string(h) + "/.cache/ember";
    else
        base = "/tmp/ember-cache";
    return std::filesystem::path(base) / "cuda-fusion";
}

constexpr char kMagic[8] = {'E', 'M', 'B', 'C', 'U', 'F', 'S', '1'};

/// The image stored for `id`, or nothing when absent, unreadable, or not exactly what was
/// written for this id (a torn or foreign file is ignored and later overwritten).
std::optional<std::string> read_cached(const std::filesystem::path& file, const std::string& id) {
    std::ifstream in(file, std::ios::binary);
    if (!in) return std::nullopt;
    std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const std::size_t head = sizeof kMagic + 3 * sizeof(std::uint64_t);
    if (all.size() < head || std::memcmp(all.data(), kMagic, sizeof kMagic) != 0)
        return std::nullopt;
    std::uint64_t id_len = 0, img_len = 0, sum = 0;
    std::memcpy(&id_len, all.data() + 8, 8);
    std::memcpy(&img_len, all.data() + 16, 8);
    std::memcpy(&sum, all.data() + 24, 8);
    if (id_len > all.size() || img_len > all.size() || all.size() != head + id_len + img_len)
        return std::nullopt;
    if (all.compare(head, id_len, id) != 0) return std::nullopt;
    std::string image = all.substr(head + id_len);
    if (fnv1a(image.data(), image.size()) != sum) return std::nullopt;
    return image;
}

/// Writes the image under a temporary name, then renames it into place: readers see the whole
/// file or none. Failures are ignored (the cache only saves time).
void write_cached(const std::filesystem::path& file, const std::string& id,
                  const std::string& image) {
    static std::atomic<unsigned> counter{0};
    std::error_code ec;
    std::filesystem::create_directories(file.parent_path(), ec);
    const auto tmp = file.string() + ".tmp." + std::to_string(::getpid()) + "." +
                     std::to_string(counter.fetch_add(1));
    {
        std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
        if (!out) return;
        const std::uint64_t id_len = id.size(), img_len = image.size(),
                            sum = fnv1a(image.data(), image.size());
        out.write(kMagic, sizeof kMagic);
        out.write(reinterpret_cast<const char*>(&id_len), 8);
        out.write(reinterpret_cast<const char*>(&img_len), 8);
        out.write(reinterpret_cast<const char*>(&sum), 8);
        out.write(id.data(), static_cast<std::streamsize>(id.size()));
        out.write(image.data(), static_cast<std::streamsize>(image.size()));
        if (!out) {
            out.close();
            std::filesystem::remove(tmp, ec);
            return;
        }
    }
    std::filesystem::rename(tmp, file, ec);
    if (ec) std::filesystem::remove(tmp, ec);
}

/// The compiled image of `src` for device `device` (memory of this module first, then the
/// disk, then NVRTC).
std::string image_for(const FusedSource& src, int device) {
    int major = 0, minor = 0, drv = 0;
    EMBER_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
    EMBER_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
    EMBER_CUDA_CHECK(cudaDriverGetVersion(&drv));
    const auto [arch, cubin] = target_for(major * 10 + minor);
    std::ostringstream id;
    id << "nvrtc " << nvrtc_version() << "; driver " << drv << "; " << (cubin ? "sm_" : "compute_")
       << arch << "; source " << std::hex << fnv1a(src.code.data(), src.code.size()) << " "
       << src.code.size();
    char name[32];
    std::snprintf(name, sizeof name, "%016llx.bin",
                  static_cast<unsigned long long>(fnv1a(id.str().data(), id.str().size())));
    const auto file = cache_dir() / name;
    if (auto img = read_cached(file, id.str())) {
        g_disk_hits.fetch_add(1, std::memory_order_relaxed);
        return *img;
    }
    std::string image = ember::cuda::nvrtc_compile(src.code, arch, cubin);
    write_cached(file, id.str(), image);
    return image;
}

const FusedFunctions& functions(FusedModule& m, int device) {
    std::lock_guard lock(m.mu);
    if (auto it = m.loaded.find(device); it != m.loaded.end()) return it->second;
    use_device(device);
    (void)stream(device);  // the device's primary context is current from here on
    const std::string image = image_for(m.source, device);
    const DriverApi& drv = driver_api();
    CUmodule mod = nullptr;
    check_cu(drv.module_load_data(&mod, image.data()), "cuModuleLoadData", m.source.name.c_str());
    g_loads.fetch_add(1, std::memory_order_relaxed);
    FusedFunctions f;
    auto get = [&](const char* suffix, void*& out) {
        const std::string fn = m.source.name + suffix;
        CUfunction h = nullptr;
        check_cu(drv.module_get_function(&h, mod, fn.c_str()), "cuModuleGetFunction", fn.c_str());
        out = h;
    };
    if (m.source.rows) {
        get("_rows", f.rows);
    } else if (m.source.dense) {
        get("_vec4", f.vec4);
        get("_dense", f.dense);
    } else {
        get("_strided", f.strided);
    }
    // The module stays loaded for the life of the process, as the kernels of the library.
    return m.loaded.emplace(device, f).first->second;
}

constexpr unsigned kThreads = 256;
constexpr std::int64_t kMaxBlocks = 65535 * 8;

unsigned blocks(std::int64_t work) {
    return static_cast<unsigned>(
        std::clamp<std::int64_t>((work + kThreads - 1) / kThreads, 1, kMaxBlocks));
}

bool aligned_for_vec4(const CudaTensor& t) {
    const std::size_t need = std::min<std::size_t>(16, 4 * dtype_size(t.dtype));
    return reinterpret_cast<std::uintptr_t>(t.ptr()) % need == 0;
}

}  // namespace
}  // namespace detail::cuda

CudaBackend::FusedKernel CudaBackend::fused_compile(const fusion::Program& program) {
    auto m = std::make_shared<k::FusedModule>();
    m->source = k::generate_fused_source(program);
    m->key = program.key();
    if (const char* d = std::getenv("EMBER_FUSION_DUMP"); d && std::string(d) == "1")
        std::cerr << "ember: Fusion<Cuda> kernel " << m->source.name << "\n"
                  << m->source.code << std::flush;
    return m;
}

std::vector<CudaBackend::FT> CudaBackend::fused_launch(const FusedKernel& kernel,
                                                       const fusion::Program& p,
                                                       std::vector<FT> inputs,
                                                       std::span<const Scalar> scalars,
                                                       const Shape& shape) {
    const k::FusedSource& src = kernel->source;
    const std::size_t n_in = p.inputs.size();
    EMBER_CHECK(inputs.size() == n_in, Argument, "fused program: ", n_in, " inputs expected, got ",
                inputs.size());
    EMBER_CHECK(scalars.size() >= src.scalars.size(), Argument,
                "fused program: ", src.scalars.size(), " scalars expected, got ", scalars.size());
    const int device = inputs.empty() ? 0 : inputs[0].device();
    for (std::size_t i = 0; i < n_in; ++i) {
        const FT& t = inputs[i];
        EMBER_CHECK(t.shape == shape && t.dtype == p.inputs[i].dtype, Shape,
                    "fused program: input ", i, " is ", t.shape.to_string(), " ",
                    dtype_name(t.dtype), ", expected ", shape.to_string(), " ",
                    dtype_name(p.inputs[i].dtype));
        k::check_same_device("fused program", inputs[0], t);
        EMBER_CHECK(!p.inputs[i].dense || t.is_contiguous(), Argument, "fused program: input ", i,
                    " of shape ", t.shape.to_string(), " is strided, the program reads it dense");
    }
    std::vector<FT> outs;
    outs.reserve(p.outputs.size() + 1);
    for (auto o : p.outputs) outs.push_back(k::empty(shape, p.reg_dtype(o), device));
    const auto n = static_cast<std::int64_t>(shape.num_elements());
    if (p.reduce)
        outs.push_back(
            k::empty(ember::fusion::reduced_shape(shape), p.reg_dtype(p.reduce->reg), device));
    if (n == 0) return outs;

    const k::FusedFunctions& fns = k::functions(*kernel, device);
    // Kernel arguments: every one is 8 bytes but the strided kernel's geometry. A reduction's
    // output comes last, after the scalars.
    const std::size_t n_elem_out = p.outputs.size();
    std::vector<std::uint64_t> words;
    words.reserve(2 + n_in + outs.size() + src.scalars.size());
    words.push_back(static_cast<std::uint64_t>(n));
    for (const FT& t : inputs) words.push_back(reinterpret_cast<std::uintptr_t>(t.ptr()));
    for (std::size_t o = 0; o < n_elem_out; ++o)
        words.push_back(reinterpret_cast<std::uintptr_t>(outs[o].ptr()));
    for (std::size_t s = 0; s < src.scalars.size(); ++s) {
        std::uint64_t w = 0;
        if (src.scalars[s] == k::ScalarParam::F64)
            std::memcpy(&w, &scalars[s].f, 8);
        else
            std::memcpy(&w, &scalars[s].i, 8);
        words.push_back(w);
    }
    if (src.rows) words.push_back(reinterpret_cast<std::uintptr_t>(outs.back().ptr()));
    std::vector<void*> args;
    args.reserve(words.size() + 2);
    args.push_back(&words[0]);
    std::vector<std::int64_t> geo;
    void* fn = nullptr;
    unsigned grid = 0;
    std::int64_t cols = 0;
    if (src.rows) {
        // (rows, cols), then the geometry when strided.
        cols = static_cast<std::int64_t>(shape[shape.rank() - 1]);
        words[0] = static_cast<std::uint64_t>(n / cols);
        args.push_back(&cols);
        grid = static_cast<unsigned>(std::min<std::int64_t>(n / cols, k::kMaxBlocks));
        fn = fns.rows;
    } else if (src.dense) {
        bool aligned = true;
        for (const FT& t : inputs) aligned = aligned && k::aligned_for_vec4(t);
        fn = aligned ? fns.vec4 : fns.dense;
        grid = aligned ? k::blocks(n / 4) : k::blocks(n);
    } else {
        fn = fns.strided;
        grid = k::blocks(n);
    }
    if (!src.dense) {
        // Shape, then each input's strides, `rank` wide (rank 0 iterates one element).
        const std::size_t rank = std::max<std::size_t>(shape.rank(), 1);
        geo.assign(rank * (1 + n_in), 0);
        for (std::size_t d = 0; d < rank; ++d)
            geo[d] = shape.rank() == 0 ? 1 : static_cast<std::int64_t>(shape[d]);
        for (std::size_t i = 0; i < n_in; ++i)
            for (std::size_t d = 0; d < shape.rank(); ++d)
                geo[rank * (1 + i) + d] = inputs[i].strides[d];
        args.push_back(geo.data());
    }
    for (std::size_t w = 1; w < words.size(); ++w) args.push_back(&words[w]);
    auto* stream = reinterpret_cast<CUstream>(k::stream(device));
    k::check_cu(k::driver_api().launch_kernel(static_cast<CUfunction>(fn), grid, 1, 1, k::kThreads,
                                              1, 1, 0, stream, args.data(), nullptr),
                "cuLaunchKernel", src.name.c_str());
    return outs;
}

namespace cuda {

FusionCompileStats fusion_compile_stats() {
    return {k::g_compiles.load(), k::g_disk_hits.load(), k::g_loads.load()};
}

std::string fused_source(const fusion::Program& program) {
    return k::generate_fused_source(program).code;
}

std::string nvrtc_compile(const std::string& source, int arch, bool cubin) {
    nvrtcProgram prog = nullptr;
    k::check_nvrtc(nvrtcCreateProgram(&prog, source.c_str(), "ember_fused.cu", 0, nullptr, nullptr),
                   "nvrtcCreateProgram");
    struct Guard {
        nvrtcProgram* p;
        ~Guard() { nvrtcDestroyProgram(p); }
    } guard{&prog};
    const std::string gpu =
        std::string("--gpu-architecture=") + (cubin ? "sm_" : "compute_") + std::to_string(arch);
    // The unfused kernels' floating-point settings (nvcc's defaults): IEEE division and square
    // root, denormals kept, FMA contraction within an expression.
    const char* opts[] = {gpu.c_str(),        "--std=c++17", "--prec-div=true",
                          "--prec-sqrt=true", "--ftz=false", "--fmad=true"};
    const nvrtcResult r = nvrtcCompileProgram(prog, 6, opts);
    k::g_compiles.fetch_add(1, std::memory_order_relaxed);
    if (r != NVRTC_SUCCESS) {
        std::size_t n = 0;
        std::string log;
        if (nvrtcGetProgramLogSize(prog, &n) == NVRTC_SUCCESS && n > 1) {
            log.resize(n);
            nvrtcGetProgramLog(prog, log.data());
            log.resize(n - 1);
        }
        k::check_nvrtc(r, "nvrtcCompileProgram", log);
    }
    std::size_t size = 0;
    std::string image;
    if (cubin) {
        k::check_nvrtc(nvrtcGetCUBINSize(prog, &size), "nvrtcGetCUBINSize");
        image.resize(size);
        k::check_nvrtc(nvrtcGetCUBIN(prog, image.data()), "nvrtcGetCUBIN");
    } else {
        k::check_nvrtc(nvrtcGetPTXSize(prog, &size), "nvrtcGetPTXSize");
        image.resize(size);  // PTX ends in its NUL, which cuModuleLoadData needs
        k::check_nvrtc(nvrtcGetPTX(prog, image.data()), "nvrtcGetPTX");
    }
    return image;
}

}  // namespace cuda
}  // namespace ember
