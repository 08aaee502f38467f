// Batched matmul (shaders/matmul.comp, matmul_large.comp) with automatic kernel selection: on
// first use per device and shape bucket, each tiled candidate that fits the device runs on the
// real operands and the fastest is kept, in memory and in a per-device file beside the pipeline
// cache. EMBER_AUTOTUNE=0 turns tuning off (a size heuristic picks the kernel). f16 and bf16
// operands take the cooperative-matrix kernel (shaders/matmul_coop.comp) where the device has
// one, after packing them to 16-bit pairs (shaders/pack_f16.comp); its configurations are tuned
// the same way, in tables of their own, beside those of the workgroup-scope kernel
// (shaders/matmul_cm2.comp, VK_NV_cooperative_matrix2) where the device has one.
#include <algorithm>
#include <bit>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <tuple>
#include <utility>

#include "kernels.hpp"

namespace ember::detail::vk {

namespace {

/// `count` integers separated by colons ("128:128:16:8:16:8:0"), the form of the forced kernel
/// configurations below; nothing if `text` is anything else.
std::optional<std::vector<std::int32_t>> int_fields(const char* text, std::size_t count) {
    std::vector<std::int32_t> f(count);
    std::istringstream in(text);
    in >> f[0];
    for (std::size_t i = 1; i < count; ++i) {
        char sep = 0;
        in >> sep >> f[i];
        if (sep != ':') return std::nullopt;
    }
    if (!in || in.peek() != EOF) return std::nullopt;
    return f;
}

/// `required` integers separated by colons, then up to defaults.size() optional ones, those
/// left out taken from `defaults`; nothing if `text` is anything else.
std::optional<std::vector<std::int32_t>> int_fields(const char* text, std::size_t required,
                                                    std::span<const std::int32_t> defaults) {
    for (std::size_t n = required + defaults.size(); n >= required; --n)
        if (auto f = int_fields(text, n)) {
            f->insert(f->end(), defaults.begin() + static_cast<std::ptrdiff_t>(n - required),
                      defaults.end());
            return f;
        }
    return std::nullopt;
}

/// One kernel: MODE 1 (naive), MODE 0/2 (matmul.comp's tiles, scalar or vec4 loads) or
/// MODE 3 (matmul_large.comp: double-buffered tiles, vec4 loads) with its tile sizes; MODE 3
/// also has a warp's lane grid (lr lanes along rows) and the tile-order grouping gm.
struct Variant {
    std::int32_t mode, bm, bn, bk, tm, tn, lr = 4, gm = 0;
    std::uint32_t threads() const {
        return mode == 1 ? 256u : static_cast<std::uint32_t>((bm / tm) * (bn / tn));
    }
    std::size_t shared_bytes() const {
        if (mode == 1) return 0;
        return (mode == 3 ? 2 : 1) * 4u * bk * (bm + bn);  // MODE 3: two buffers
    }
    /// Whether it reads the operands 16 bytes at a time (vec4_ok must hold).
    bool vec4() const { return mode >= 2; }
    const char* shader() const { return mode == 3 ? "matmul_large" : "matmul"; }
};

/// Whether matmul_large.comp can be specialised to v: its layout assumes 4 x 4 blocks, whole
/// warps of 32 lanes on an lr x (32 / lr) grid of threads, every thread loading the same
/// number of quads of each operand, and rows of As in groups of 8 slots (its XOR permutation).
constexpr bool large_well_formed(const Variant& v) {
    auto pow2 = [](std::int32_t x) { return x > 0 && (x & (x - 1)) == 0; };
    if (v.mode != 3 || v.tm <= 0 || v.tn <= 0 || v.tm % 4 != 0 || v.tn % 4 != 0) return false;
    if (v.bm <= 0 || v.bn <= 0 || v.bm % v.tm != 0 || v.bn % v.tn != 0 || v.bm % 32 != 0)
        return false;
    const std::int32_t tr = v.bm / v.tm, tc = v.bn / v.tn, nt = tr * tc;
    if (!pow2(v.lr) || v.lr > 8 || tr % v.lr != 0 || tc % (32 / v.lr) != 0) return false;
    if (!pow2(v.bk) || v.bk < 4 || v.bk > 32) return false;
    return (v.bm * v.bk / 4) % nt == 0 && (v.bn * v.bk / 4) % nt == 0 && v.gm >= 0;
}

// Candidates: register-blocked shared-memory tiles of several shapes and the naive kernel.
constexpr Variant kVariants[] = {
    {0, 64, 64, 16, 4, 4},   // 256 threads, 4x4 blocks: large square problems
    {0, 128, 64, 16, 8, 4},  // 256 threads, 8x4 blocks: tall problems, more reuse per load
    {0, 32, 32, 16, 2, 2},   // 256 threads: medium problems, more workgroups
    {0, 16, 16, 16, 1, 1},   // 256 threads: small problems
    {1, 0, 0, 0, 0, 0},      // one thread per output
    {2, 64, 64, 16, 4, 4},   // 5-7: the tiles of 0-2 with vec4 loads
    {2, 128, 64, 16, 8, 4},
    {2, 32, 32, 16, 2, 2},
    {2, 128, 128, 16, 8, 8},  // 8: 256 threads, 8x8 blocks, vec4 loads: the largest problems
    // 9-10: 256 threads, 8x8 blocks as 2x2 of 4x4, A transposed in shared memory, vec4 shared
    // reads, two shared buffers (the next k slice loaded during the current one's products).
    {3, 128, 128, 8, 8, 8},
    {3, 128, 128, 16, 8, 8},
    // 11-13: 8 x 16 (or 8 x 8) a thread, 16 deep: the fastest of bench_vulkan's gemm-sweep on
    // an H200 (128 x 256 tiles: 48 TFLOP/s at 8192^3, against 37 for 9), and smaller tiles that
    // make more workgroups for medium problems.
    {3, 128, 256, 16, 8, 16, 8, 0},
    {3, 128, 128, 16, 8, 16, 4, 0},
    {3, 64, 128, 16, 8, 8, 2, 0},
};
constexpr std::size_t kNaive = 4;
constexpr std::size_t kLarge = 11;
/// The scalar-load twin of a vec4 variant.
constexpr std::size_t scalar_twin(std::size_t v) {
    return v >= 8 ? 1 : (v >= 5 ? v - 5 : v);
}
constexpr std::size_t kNumVariants = sizeof(kVariants) / sizeof(kVariants[0]);
static_assert([] {
    for (const Variant& v : kVariants)
        if (v.mode == 3 && !large_well_formed(v)) return false;
    return true;
}());

struct Problem {
    std::size_t m = 0, n = 0, k = 0, batch = 1;
    Shape batch_shape;
    std::array<i64, 6> a_bs{}, b_bs{};
};

bool autotune_enabled() {
    const char* e = std::getenv("EMBER_AUTOTUNE");
    return !(e && std::string(e) == "0");
}

std::size_t bucket(std::size_t v) {
    return std::bit_ceil(std::max<std::size_t>(v, 1));
}

/// A per-device table of winners: (M, N, K, batched) bucket → candidate index, kept in memory
/// and in the file `name` beside the pipeline cache.
struct Tuned {
    std::mutex mu;
    std::map<std::tuple<std::size_t, std::size_t, std::size_t, bool>, std::size_t> best;
    bool loaded = false;
};
Tuned& tuned(const Context& cx, const std::string& name) {
    static std::mutex mu;
    static std::map<std::pair<std::uint32_t, std::string>, Tuned> t;
    std::lock_guard lock(mu);
    return t[{cx.index(), name}];
}

/// Reads table `name` once; entries past `count` candidates (a stale file) are dropped.
void load_tuned(Context& cx, Tuned& t, const std::string& name, std::size_t count) {
    if (t.loaded) return;
    t.loaded = true;
    std::ifstream f(cx.cache_file(name));
    std::size_t m, n, k, v;
    int b;
    while (f >> m >> n >> k >> b >> v)
        if (v < count) t.best[{m, n, k, b != 0}] = v;
}

void save_tuned(Context& cx, const Tuned& t, const std::string& name) {
    std::error_code ec;
    std::filesystem::create_directories(cx.cache_dir(), ec);
    const std::string path = cx.cache_file(name);
    const std::string tmp = path + ".tmp";
    {
        std::ofstream f(tmp);
        if (!f) return;
        for (const auto& [key, v] : t.best)
            f << std::get<0>(key) << ' ' << std::get<1>(key) << ' ' << std::get<2>(key) << ' '
              << int(std::get<3>(key)) << ' ' << v << '\n';
    }
    std::filesystem::rename(tmp, path, ec);
}

std::tuple<std::size_t, std::size_t, std::size_t, bool> tune_key(const Problem& pr) {
    return {bucket(pr.m), bucket(pr.n), bucket(pr.k), pr.batch > 1};
}

/// Times `run(i)` for each candidate i < count that `usable(i)` allows, in two rounds (the
/// first call of each also creates its pipeline), and returns the fastest by its better round,
/// else `fallback`. Each timing is `calls` calls with the queue drained around them. Two rounds,
/// because a GPU that starts idle raises its clocks during the first: timed once, the late
/// candidates ran faster for that alone (an H100 picked a kernel 16% slower than the best).
/// The time is the device's, from the profiler's timestamps (a timestamp after every dispatch),
/// where the queue has timestamps and the profile is off and empty (the user's is left alone);
/// else the wall clock around
/// the calls and waits. Timed by the wall clock, the host's time to record each dispatch was in
/// the figure: it is not in a replayed step (nor, overlapped with the device, in most eager
/// ones), it counted against candidates of more dispatches (a split's three) and its jitter
/// changed the picks between runs (the MNIST MLP's replayed step took 0.200 to 0.236 ms on an
/// H200 with the tables of different runs).
template <class Usable, class Run>
std::size_t fastest(Context& cx, std::size_t count, std::size_t fallback, Usable usable, Run run,
                    int calls) {
    Recorder& rec = cx.recorder();
    struct DeviceClock {
        Recorder& rec;
        bool on;
        ~DeviceClock() {
            if (!on) return;
            rec.set_profiling(false);
            rec.kernel_times(true);  // the tuner's timings are not the user's profile
        }
    } clock{rec,
            cx.info().timestamp_period > 0 && !rec.profiling() && rec.kernel_times(false).empty()};
    if (clock.on) rec.set_profiling(true);
    std::vector<double> best_time(count, 1e300);
    for (int round = 0; round < 2; ++round)
        for (std::size_t i = 0; i < count; ++i) {
            if (!usable(i)) continue;
            if (round == 0) run(i);
            cx.wait_idle();
            if (clock.on) rec.kernel_times(true);
            const auto t0 = std::chrono::steady_clock::now();
            // Each call after a barrier, as a step's dependent ops run: unordered, calls
            // that write fresh buffers (the splits' partial products) would overlap and look
            // faster than they run in a step.
            for (int r = 0; r < calls; ++r) {
                run(i);
                rec.serialize();
            }
            cx.wait_idle();
            double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            if (clock.on) {
                t = 0;
                for (const auto& k : rec.kernel_times(true)) t += k.microseconds;
            }
            best_time[i] = std::min(best_time[i], t);
        }
    const auto it = std::min_element(best_time.begin(), best_time.end());
    return *it < 1e300 ? static_cast<std::size_t>(it - best_time.begin()) : fallback;
}

/// The winner of table `name` (beside the pipeline cache) for pr's shape bucket: the one
/// recorded, else the fastest of the `count` candidates that `usable` allows (`fallback` if
/// none), recorded in memory and on disk. Callers map a recorded winner this call's operands or
/// device cannot take.
template <class Usable, class Run>
std::size_t tuned_choice(Context& cx, const std::string& name, std::size_t count, const Problem& pr,
                         std::size_t fallback, Usable usable, Run run) {
    Tuned& t = tuned(cx, name);
    const auto key = tune_key(pr);
    {
        std::lock_guard lock(t.mu);
        load_tuned(cx, t, name, count);
        if (auto it = t.best.find(key); it != t.best.end()) return it->second;
    }
    // Timed without the table's lock: the runs take the recorder's, which a capture on another
    // thread may hold while it, too, looks a shape up here. Two threads tuning one shape at once
    // both time it; either winner is a fine choice.
    // Three calls a timing where a call is long; up to 24 where it is short (2^28 / M·N·K),
    // so that the device's time, not the submission and the wait around it, tells candidates
    // apart (with three, a split of K ran 12 % slower in MNIST's step than the one the
    // tuner's noise passed over).
    const std::size_t macs = std::max<std::size_t>(pr.batch * pr.m * pr.n * pr.k, 1);
    const int calls =
        static_cast<int>(std::clamp<std::size_t>((std::size_t{1} << 28) / macs, 3, 24));
    const std::size_t best = fastest(cx, count, fallback, usable, run, calls);
    std::lock_guard lock(t.mu);
    t.best.emplace(key, best);
    save_tuned(cx, t, name);
    return t.best.at(key);
}

/// Whether 16-byte loads can read both operands: row-major rows of a multiple of 4 elements
/// starting at multiples of 4 (allocations are 256-byte aligned).
bool vec4_ok(const Problem& pr, const VT& a, const VT& b) {
    const std::size_t ra = a.shape.rank(), rb = b.shape.rank();
    if (ra < 2 || rb < 2 || pr.k % 4 != 0 || pr.n % 4 != 0) return false;
    if (a.strides[ra - 1] != 1 || b.strides[rb - 1] != 1) return false;
    if (a.strides[ra - 2] % 4 != 0 || b.strides[rb - 2] % 4 != 0) return false;
    if (a.offset % 4 != 0 || b.offset % 4 != 0) return false;
    for (std::size_t d = 0; d < 6; ++d)
        if (pr.a_bs[d] % 4 != 0 || pr.b_bs[d] % 4 != 0) return false;
    return true;
}

bool fits(const Context& cx, const Variant& v) {
    return v.shared_bytes() <= cx.info().max_shared_memory &&
           v.threads() <= cx.info().max_invocations;
}

/// matmul.comp's parameter words (shared by matmul_coop.comp).
Params params_of(const Problem& pr, const VT& a, const VT& b) {
    const std::size_t ra = a.shape.rank(), rb = b.shape.rank();
    Params p;
    p.push(static_cast<i64>(pr.m));
    p.push(static_cast<i64>(pr.n));
    p.push(static_cast<i64>(pr.k));
    p.push(static_cast<i64>(pr.batch));
    p.push(static_cast<i64>(pr.batch_shape.rank()));
    for (std::size_t d = 0; d < 6; ++d)
        p.push(d < pr.batch_shape.rank() ? i64(pr.batch_shape[d]) : 1);
    for (std::size_t d = 0; d < 6; ++d) p.push(pr.a_bs[d]);
    for (std::size_t d = 0; d < 6; ++d) p.push(pr.b_bs[d]);
    p.push(a.offset);
    p.push(b.offset);
    // A 1-d `a` is one row [1, K]; a 1-d `b` one column [K, 1].
    p.push(ra == 1 ? 0 : a.strides[ra - 2]);
    p.push(a.strides[ra - 1]);
    p.push(rb == 1 ? b.strides[0] : b.strides[rb - 2]);
    p.push(rb == 1 ? 0 : b.strides[rb - 1]);
    return p;
}

void launch(Context& cx, const Variant& v, const Problem& pr, const VT& a, const VT& b,
            const VT& out, std::int32_t ct) {
    Params p = params_of(pr, a, b);
    // Constant ids 1-9 of matmul.comp and matmul_large.comp (each reads those it declares).
    const std::int32_t spec[] = {v.mode, v.bm, v.bn, v.bk, v.tm, v.tn, ct, v.lr, v.gm};
    const Pipeline& pipe = cx.pipeline(v.shader(), spec, 3, v.threads());
    const Binding bs[] = {bind(out, true), bind(a, false), bind(b, false)};
    std::uint64_t groups;
    if (v.mode == 1) {
        groups = (pr.batch * pr.m * pr.n + 255) / 256;
    } else {
        groups = pr.batch * ((pr.m + v.bm - 1) / v.bm) * ((pr.n + v.bn - 1) / v.bn);
    }
    cx.dispatch(pipe, bs, p.w, groups);
}

/// A configuration of the cooperative-matrix kernel (shaders/matmul_coop.comp): a bm x bn tile
/// of C a workgroup, bk deep slices, sgm x sgn subgroups of 32, one or two shared buffers,
/// whether the operands are first packed to 16-bit pairs (shaders/pack_f16.comp), the
/// fragment's columns fn (16 x 8 x 16 or 16 x 16 x 16 products), and the tile order gm (tile
/// rows visited together; 0: row by row).
struct Coop {
    std::int32_t bm, bn, bk, sgm, sgn, db, pack, fn = 8, gm = 0;
    constexpr std::uint32_t threads() const { return static_cast<std::uint32_t>(sgm * sgn * 32); }
    constexpr std::size_t shared_bytes() const {
        const std::size_t halves = std::size_t(bm) * (bk + 8) + std::size_t(bk) * (bn + 8);
        return (db ? 2 : 1) * 2 * halves;
    }
    /// Whether the shader's layout holds: whole 16 x fn fragments per subgroup, 16-deep k
    /// steps, and every thread moving the same number of quads of each operand.
    constexpr bool well_formed() const {
        if (bm <= 0 || bn <= 0 || bk <= 0 || sgm <= 0 || sgn <= 0 || (db != 0 && db != 1) ||
            (pack != 0 && pack != 1) || (fn != 8 && fn != 16) || gm < 0)
            return false;
        const std::int32_t nt = sgm * sgn * 32;
        if (pack && ((bm * bk / 8) % nt != 0 || (bk * bn / 8) % nt != 0)) return false;
        // Edge tiles stage a 16 x fn f32 fragment per subgroup in A's shared slice.
        if ((db ? 2 : 1) * bm * (bk + 8) * 2 < sgm * sgn * 16 * fn * 4) return false;
        return bm % (sgm * 16) == 0 && bn % (sgn * fn) == 0 && bk % 16 == 0 &&
               (bm * bk / 4) % nt == 0 && (bk * bn / 4) % nt == 0;
    }
    /// Whether device `cx` can run it on `bf16` (else f16) operands: bf16 has only the
    /// 16 x 16 x 16 shape, packed operands and the KHR extension; 16 x 16 x 16 f16 needs KHR.
    bool runs_on(const Context& cx, bool bf16) const {
        const DeviceInfo& d = cx.info();
        if (bf16 ? !(d.coop_bf16 && fn == 16 && pack) : (fn == 16 && !d.coop_f16_n16)) return false;
        return well_formed() && shared_bytes() <= d.max_shared_memory &&
               threads() <= d.max_invocations;
    }
};

// Candidates for automatic selection, each with 8- and 16-column fragments, from
// bench_vulkan's coop-sweep of 355 configurations on an H100 (KHR, 8192^3, packed operands),
// then the best timed three times over (f16, 8-column fragments unless named). 0: 128 x 128
// tiles of 4 subgroups, each a 64 x 64 piece, one shared buffer of 48-deep slices (229-230
// TFLOP/s); 1: 128 x 256 tiles of 8 subgroups of 64 x 64, 32 deep (220-223); 2: 128 x 128 of
// 4 subgroups with two buffers of 32-deep slices (227-228 with 16 columns); 3: 128 x 128 of 8
// subgroups of 64 x 32, 64 deep (the NV path's best, 199-203 here); 4-5: smaller tiles, more
// workgroups for problems that fill fewer than a wave.
constexpr Coop kCoopShapes[] = {
    {128, 128, 48, 2, 2, 0, 1}, {128, 256, 32, 2, 4, 0, 1}, {128, 128, 32, 2, 2, 1, 1},
    {128, 128, 64, 2, 4, 0, 1}, {64, 128, 64, 2, 4, 0, 1},  {64, 64, 64, 2, 2, 0, 1},
};
constexpr std::size_t kNumCoopShapes = std::size(kCoopShapes);
constexpr std::size_t kNumCoop = 2 * kNumCoopShapes;
/// Candidate i: shape i % kNumCoopShapes with 8 (i < kNumCoopShapes) or 16 fragment columns.
constexpr Coop coop_candidate(std::size_t i) {
    Coop c = kCoopShapes[i % kNumCoopShapes];
    c.fn = i < kNumCoopShapes ? 8 : 16;
    return c;
}
static_assert([] {
    for (std::size_t i = 0; i < kNumCoop; ++i)
        if (!coop_candidate(i).well_formed()) return false;
    return true;
}());

/// EMBER_VULKAN_COOP_CONFIG="bm:bn:bk:sgm:sgn:db:pack[:fn[:gm]]" forces a configuration
/// (bench_vulkan's coop-sweep; fn 8 and gm 0 when left out); nothing when unset.
std::optional<Coop> forced_coop(const Context& cx, bool bf16) {
    const char* e = std::getenv("EMBER_VULKAN_COOP_CONFIG");
    if (!e || !*e) return std::nullopt;
    const std::int32_t defaults[] = {8, 0};  // fn, gm
    const auto f = int_fields(e, 7, defaults);
    Coop c{};
    if (f)
        c = {(*f)[0], (*f)[1], (*f)[2], (*f)[3], (*f)[4], (*f)[5], (*f)[6], (*f)[7], (*f)[8]};
    EMBER_CHECK(f && c.well_formed(), Argument, "EMBER_VULKAN_COOP_CONFIG=", e,
                ": not a valid bm:bn:bk:sgm:sgn:db:pack[:fn[:gm]] configuration of "
                "matmul_coop.comp");
    EMBER_CHECK(
        c.shared_bytes() <= cx.info().max_shared_memory && c.threads() <= cx.info().max_invocations,
        Argument, "EMBER_VULKAN_COOP_CONFIG=", e, ": needs ", c.shared_bytes(),
        " B of shared memory and ", c.threads(), " threads; the device has ",
        cx.info().max_shared_memory, " B and ", cx.info().max_invocations);
    EMBER_CHECK(c.runs_on(cx, bf16), Argument, "EMBER_VULKAN_COOP_CONFIG=", e, ": ",
                bf16 ? "bf16 matmuls need fn 16 and pack 1 on a device with bf16 cooperative "
                       "matrices"
                     : "fn 16 needs a device with f16 16x16x16 cooperative matrices (KHR)");
    return c;
}

/// An operand of the 16-bit matmul as f16 or bf16 pairs (shaders/pack_f16.comp): contiguous
/// [batch][rows][cols rounded up to 8] halves, one copy per batch entry of the product
/// (broadcast operands repeat). rs and cs are the row and column strides.
VT pack_halves(Context& cx, const Problem& pr, const VT& t, const std::array<i64, 6>& batch_strides,
               std::size_t rows, std::size_t cols, i64 rs, i64 cs, bool bf16) {
    const std::size_t cols8 = (cols + 7) / 8;
    const std::size_t words = pr.batch * rows * cols8 * 4;  // 4 words (8 halves) a 16 bytes
    VT out = empty(Shape{words}, DType::F32, t.device);
    Params p;
    p.push(static_cast<i64>(rows));
    p.push(static_cast<i64>(cols));
    p.push(static_cast<i64>(pr.batch));
    p.push(static_cast<i64>(pr.batch_shape.rank()));
    for (std::size_t d = 0; d < 6; ++d)
        p.push(d < pr.batch_shape.rank() ? i64(pr.batch_shape[d]) : 1);
    for (std::size_t d = 0; d < 6; ++d) p.push(batch_strides[d]);
    p.push(t.offset);
    p.push(rs);
    p.push(cs);
    const std::int32_t spec[] = {bf16 ? 1 : 0};
    const Pipeline& pipe = cx.pipeline("pack_f16", spec, 2, 256);
    const Binding bs[] = {bind(out, true), bind(t, false)};
    cx.dispatch(pipe, bs, p.w, (pr.batch * rows * cols8 + 255) / 256);
    return out;
}

/// Both operands packed to 16-bit pairs, with the strides params_of put in `p` (A is M x K, B is
/// K x N).
std::pair<VT, VT> pack_operands(Context& cx, const Problem& pr, const VT& a, const VT& b,
                                const Params& p, bool bf16) {
    const i64 ars = p.w[25], acs = p.w[26], brs = p.w[27], bcs = p.w[28];
    return {pack_halves(cx, pr, a, pr.a_bs, pr.m, pr.k, ars, acs, bf16),
            pack_halves(cx, pr, b, pr.b_bs, pr.k, pr.n, brs, bcs, bf16)};
}

/// Launches coop configuration `c`; the products are rounded to the output's dtype where it is
/// f16 or bf16 (f32: kept as they are).
void launch_coop(Context& cx, const Coop& c, const Problem& pr, const VT& a, const VT& b,
                 const VT& out, bool vec4, bool bf16) {
    Params p = params_of(pr, a, b);
    const std::int32_t rnd = out.dtype == DType::F16 ? 1 : out.dtype == DType::BF16 ? 2 : 0;
    const std::int32_t spec[] = {c.bm, c.bn, c.bk, c.sgm, c.sgn, c.db, c.pack ? 2 : vec4 ? 1 : 0,
                                 c.fn, c.gm, rnd};
    const char* shader = cx.info().coop != DeviceInfo::Coop::Khr ? "matmul_coop"
                         : bf16                                  ? "matmul_coop@khr_bf16"
                                                                 : "matmul_coop@khr";
    const Pipeline& pipe = cx.pipeline(shader, spec, 3, c.threads());
    const std::uint64_t groups = pr.batch * ((pr.m + c.bm - 1) / c.bm) * ((pr.n + c.bn - 1) / c.bn);
    if (!c.pack) {
        const Binding bs[] = {bind(out, true), bind(a, false), bind(b, false)};
        cx.dispatch(pipe, bs, p.w, groups);
        return;
    }
    const auto [pa, pb] = pack_operands(cx, pr, a, b, p, bf16);
    const Binding bs[] = {bind(out, true), bind(pa, false), bind(pb, false)};
    cx.dispatch(pipe, bs, p.w, groups);
}

/// A configuration of the workgroup-scope kernel (shaders/matmul_cm2.comp,
/// VK_NV_cooperative_matrix2): a bm x bn tile of C a workgroup, bk deep steps, u of them an
/// iteration of the K loop, tile order gm.
struct Cm2 {
    std::int32_t bm, bn, bk, gm = 0, u = 1;
};

/// The workgroup size matmul_cm2.comp declares: the driver stages the matrices for the declared
/// size, so it is not specialised.
constexpr std::uint32_t kCm2Invocations = 256;

/// The device's workgroup-scope shape for kCm2Invocations that `c` fits on `bf16` (else f16)
/// operands, if any: dimensions multiples of its granularities and within the device's largest.
const DeviceInfo::Cm2Shape* cm2_shape(const Context& cx, const Cm2& c, bool bf16) {
    const DeviceInfo& d = cx.info();
    if (c.bm <= 0 || c.bn <= 0 || c.bk <= 0 || c.gm < 0 || c.u < 1 || c.u > 16) return nullptr;
    const auto max_dim = static_cast<std::int32_t>(d.cm2_max_dim);
    if (c.bm > max_dim || c.bn > max_dim || c.bk > max_dim) return nullptr;
    for (const auto& s : d.cm2)
        if (s.bf16 == bf16 && s.invocations == kCm2Invocations &&
            c.bm % static_cast<std::int32_t>(s.mg) == 0 &&
            c.bn % static_cast<std::int32_t>(s.ng) == 0 &&
            c.bk % static_cast<std::int32_t>(s.kg) == 0 && s.invocations <= d.cm2_max_invocations &&
            s.invocations <= d.max_invocations)
            return &s;
    return nullptr;
}

/// Whether the workgroup-scope kernel can take problem `pr` in configuration `c`: it has no
/// edge handling, so bm and bn must divide M and N, and bk x u must divide K.
bool cm2_fits(const Context& cx, const Cm2& c, const Problem& pr, bool bf16) {
    return cm2_shape(cx, c, bf16) && pr.m % c.bm == 0 && pr.n % c.bn == 0 &&
           pr.k % (c.bk * c.u) == 0;
}

/// EMBER_VULKAN_CM2_CONFIG="bm:bn:bk[:gm[:u]]" forces a workgroup-scope configuration
/// (bench_vulkan's cm2-sweep); nothing when unset.
std::optional<Cm2> forced_cm2(const Context& cx, bool bf16) {
    const char* env = std::getenv("EMBER_VULKAN_CM2_CONFIG");
    if (!env || !*env) return std::nullopt;
    const std::int32_t defaults[] = {0, 1};  // gm, u
    const auto f = int_fields(env, 3, defaults);
    EMBER_CHECK(f, Argument, "EMBER_VULKAN_CM2_CONFIG=", env,
                ": not a valid bm:bn:bk[:gm[:u]] configuration of matmul_cm2.comp");
    const Cm2 c{(*f)[0], (*f)[1], (*f)[2], (*f)[3], (*f)[4]};
    EMBER_CHECK(cm2_shape(cx, c, bf16), Argument, "EMBER_VULKAN_CM2_CONFIG=", env, ": device ",
                cx.info().name, " lists no workgroup-scope ", bf16 ? "bf16" : "f16",
                " cooperative matrices this tile fits");
    return c;
}

void launch_cm2(Context& cx, const Cm2& c, const Problem& pr, const VT& a, const VT& b,
                const VT& out, bool bf16) {
    Params p = params_of(pr, a, b);
    const std::int32_t spec[] = {c.bm, c.bn, c.bk, c.gm, c.u};
    const Pipeline& pipe =
        cx.pipeline(bf16 ? "matmul_cm2@cm2_bf16" : "matmul_cm2@cm2", spec, 3, kCm2Invocations);
    const auto [pa, pb] = pack_operands(cx, pr, a, b, p, bf16);
    const Binding bs[] = {bind(out, true), bind(pa, false), bind(pb, false)};
    cx.dispatch(pipe, bs, p.w, pr.batch * (pr.m / c.bm) * (pr.n / c.bn));
}

// Workgroup-scope candidates, tuned with the coop ones where the device has them (indices from
// kNumCoop on): the configurations fastest on an H100 (bench_vulkan cm2-sweep), where they lose
// to the coop kernel (at best 195-198 against 235-244 TFLOP/s) but may win on devices whose
// drivers stage better. Unrolling the K loop (u steps an iteration) lets the driver overlap the
// loads: 128 x 256 x 32 ran at 147 TFLOP/s with u 1, 182 with 2, 190 with 4 and 195 with 8.
constexpr Cm2 kCm2Shapes[] = {
    {128, 256, 32, 0, 8}, {128, 256, 32, 16, 8}, {128, 256, 32, 0, 4},
    {256, 128, 32, 0, 4}, {128, 128, 64, 0, 4},
};
constexpr std::size_t kNumCm2 = std::size(kCm2Shapes);

/// A 16-bit matmul kernel: coop candidate i (i < kNumCoop), else workgroup-scope candidate
/// i - kNumCoop; or a forced configuration of either.
struct Kernel16 {
    std::optional<Coop> coop;
    std::optional<Cm2> cm2;
};
Kernel16 candidate16(std::size_t i) {
    if (i < kNumCoop) return {coop_candidate(i), std::nullopt};
    return {std::nullopt, kCm2Shapes[i - kNumCoop]};
}

/// Runs kernel k into `out` (of the operands' dtype) and returns the product: the coop kernel
/// rounds as it stores, the workgroup-scope one stores f32 products, cast after. The tuner times
/// exactly this.
VT launch16(Context& cx, const Kernel16& k, const Problem& pr, const VT& a, const VT& b, VT out,
            bool vec4, bool bf16) {
    if (k.coop) {
        launch_coop(cx, *k.coop, pr, a, b, out, vec4, bf16);
        return out;
    }
    const DType dt = out.dtype;
    out.dtype = DType::F32;
    launch_cm2(cx, *k.cm2, pr, a, b, out, bf16);
    return cast(std::move(out), dt);
}

/// The 16-bit kernel for this problem: a forced configuration (a workgroup-scope one where it
/// fits the problem), else (EMBER_AUTOTUNE=0, or a problem that costs less than a tuning run)
/// coop candidate 0, 64 x 64 tiles where the problem is narrower, else the fastest candidate
/// measured on this device for the shape bucket (tables per element type, as the f32
/// kernels').
Kernel16 choose16(Context& cx, const Problem& pr, const VT& a, const VT& b, const VT& out,
                  bool vec4, bool bf16) {
    if (auto c = forced_cm2(cx, bf16); c && cm2_fits(cx, *c, pr, bf16)) return {std::nullopt, c};
    if (auto c = forced_coop(cx, bf16)) return {c, std::nullopt};
    const std::size_t first = bf16 ? kNumCoopShapes : 0;  // bf16 has only 16 columns
    const std::size_t h = first + (pr.m <= 64 || pr.n <= 64 ? 5 : 0);
    if (!autotune_enabled() || pr.batch * pr.m * pr.n * pr.k < (std::size_t{1} << 21))
        return candidate16(h);
    auto usable = [&](std::size_t i) {
        const Kernel16 k = candidate16(i);
        return k.cm2 ? cm2_fits(cx, *k.cm2, pr, bf16) : k.coop->runs_on(cx, bf16);
    };
    const std::size_t best = tuned_choice(
        cx, bf16 ? "matmul-coop-bf16-autotune.txt" : "matmul-coop-f16-autotune.txt",
        kNumCoop + kNumCm2, pr, h, usable,
        [&](std::size_t i) { launch16(cx, candidate16(i), pr, a, b, out, vec4, bf16); });
    // A winner recorded under another extension (EMBER_VULKAN_COOPMAT=nv has no 16 x 16 x 16),
    // or a workgroup-scope one whose tile does not divide this problem of its bucket.
    return candidate16(usable(best) ? best : h);
}

/// Without tuning: the naive kernel for tiny problems, else the largest tile that the problem
/// fills.
std::size_t heuristic(const Context& cx, const Problem& pr, bool vec4) {
    if (pr.m * pr.n * pr.k < (std::size_t{1} << 15)) return kNaive;
    // Large row-major problems: the fastest tile measured, where it makes a wave or more of
    // workgroups on a large GPU.
    if (vec4 && pr.m >= 2048 && pr.n >= 2048 && fits(cx, kVariants[kLarge])) return kLarge;
    std::size_t v = 3;
    if (pr.m >= 128 && pr.n >= 64 && fits(cx, kVariants[1]))
        v = 1;
    else if (pr.m >= 64 && pr.n >= 64 && fits(cx, kVariants[0]))
        v = 0;
    else if (pr.m >= 32 && pr.n >= 32 && fits(cx, kVariants[2]))
        v = 2;
    return vec4 && v <= 2 ? v + 5 : v;
}

/// The kernel EMBER_VULKAN_MATMUL_KERNEL names, if it can run this problem: an index into
/// kVariants (for tests that check every kernel, and for measuring one), or a configuration
/// of matmul_large.comp, "bm:bn:bk:tm:tn:lr:gm" (bench_vulkan's gemm-sweep). A configuration
/// the shader or the device cannot take is an error; one that needs vec4 loads where the
/// operands do not allow them is ignored, as an index is.
std::optional<Variant> forced_kernel(const Context& cx, bool vec4) {
    const char* e = std::getenv("EMBER_VULKAN_MATMUL_KERNEL");
    if (!e || !*e) return std::nullopt;
    if (std::string(e).find(':') != std::string::npos) {
        const auto f = int_fields(e, 7);
        Variant v{3, 0, 0, 0, 0, 0};
        if (f) v = {3, (*f)[0], (*f)[1], (*f)[2], (*f)[3], (*f)[4], (*f)[5], (*f)[6]};
        EMBER_CHECK(f && large_well_formed(v), Argument, "EMBER_VULKAN_MATMUL_KERNEL=", e,
                    ": not a valid bm:bn:bk:tm:tn:lr:gm configuration of matmul_large.comp");
        EMBER_CHECK(fits(cx, v), Argument, "EMBER_VULKAN_MATMUL_KERNEL=", e, ": needs ",
                    v.shared_bytes(), " B of shared memory and ", v.threads(),
                    " threads; the device has ", cx.info().max_shared_memory, " B and ",
                    cx.info().max_invocations);
        if (!vec4) return std::nullopt;
        return v;
    }
    char* end = nullptr;
    const unsigned long v = std::strtoul(e, &end, 10);
    if (*end != '\0' || v >= kNumVariants || !fits(cx, kVariants[v]) ||
        (kVariants[v].vec4() && !vec4))
        return std::nullopt;
    return kVariants[v];
}

// Split-K: a product of few output tiles and a long K (a small batch through a wide layer,
// MNIST's 64 x 784 x 512) has one workgroup an SM or fewer, each stepping through K one
// shared-memory slice at a time, and that loop's latency is its time (23 us a product on an
// H200, against 4 for cuBLAS). Split, it runs as S products over K/S-deep slices (one
// batched launch whose batch is the slices: S times the workgroups, an S-th of the loop each)
// and a sum over them. The tuner weighs these beside the plain kernels.
// (16 slices were candidates too: the tuner picked them for MNIST's 64 x 512 x 512 products,
// timed alone, but the replayed step ran 13 % slower with them than with 8 on an H200.)
constexpr std::size_t kSplits[] = {4, 8};
constexpr std::size_t kNumSplits = sizeof(kSplits) / sizeof(kSplits[0]);

/// Whether K can be split `s` ways: a plain product of matrices whose K it divides into
/// slices at least 32 deep.
bool split_ok(const Problem& pr, const VT& a, const VT& b, std::size_t s) {
    return pr.batch_shape.rank() == 0 && a.shape.rank() == 2 && b.shape.rank() == 2 &&
           pr.k % s == 0 && pr.k / s >= 32;
}

/// The product as S = `s` slices of K: a batch of S products, the slices' offsets its batch
/// strides (A's K runs along its columns, B's along its rows).
Problem split_problem(const Problem& pr, const VT& a, const VT& b, std::size_t s) {
    Problem q = pr;
    q.k = pr.k / s;
    q.batch_shape = Shape{s};
    q.batch = s;
    q.a_bs[0] = static_cast<i64>(q.k) * a.strides[1];
    q.b_bs[0] = static_cast<i64>(q.k) * b.strides[0];
    return q;
}

/// The product split `s` ways: partial products [s, M, N] in 32 x 32 tiles (16 x 16 below
/// that), then their sum over the slices, itself a product: [M·N, s] (the parts, read across
/// the slices) times a column of ones, by the naive kernel, a thread an output reading the
/// parts coalesced (reduce.comp's workgroup an output would idle 56 of its 64 threads here,
/// and took 24 us on an H200 for MNIST's [8, 64, 512]).
VT launch_split(Context& cx, const Problem& pr, const VT& a, const VT& b, const Shape& out_shape,
                std::size_t s) {
    const Problem q = split_problem(pr, a, b, s);
    const bool vec4 = vec4_ok(q, a, b);
    const std::size_t v = pr.m >= 32 && pr.n >= 32 && fits(cx, kVariants[2]) ? (vec4 ? 7 : 2) : 3;
    VT parts = empty(Shape{s, pr.m, pr.n}, DType::F32, a.device);
    launch(cx, kVariants[v], q, a, b, parts, kF32);
    const std::size_t mn = pr.m * pr.n;
    const std::size_t swap[] = {1, 0};
    VT across = permute(reshape(std::move(parts), Shape{s, mn}), swap);  // [mn, s]
    VT ones = expand(full(Shape{1}, Scalar(1.0), DType::F32, a.device), Shape{s, 1});
    Problem sum;
    sum.m = mn;
    sum.n = 1;
    sum.k = s;
    VT out = empty(Shape{mn, 1}, DType::F32, a.device);
    launch(cx, kVariants[kNaive], sum, across, ones, out, kF32);
    return reshape(std::move(out), out_shape);
}

/// EMBER_VULKAN_MATMUL_SPLIT=S: every product K can be split S ways runs split (for tests and
/// measurements); 1: never split (the tuner leaves the splits out); unset: the tuner decides.
std::size_t forced_split() {
    const char* e = std::getenv("EMBER_VULKAN_MATMUL_SPLIT");
    return e && *e ? std::strtoul(e, nullptr, 10) : 0;
}

/// A choice of choose(): a kernel, and the ways K is split (1: not).
struct Choice {
    Variant v;
    std::size_t split = 1;
};

Choice choose(Context& cx, const Problem& pr, const VT& a, const VT& b, const VT& out) {
    const bool vec4 = vec4_ok(pr, a, b);
    if (auto v = forced_kernel(cx, vec4)) return {*v};
    const std::size_t h = heuristic(cx, pr, vec4);
    const std::size_t forced = forced_split();  // read once: choose runs at every product
    if (forced > 1 && split_ok(pr, a, b, forced)) return {kVariants[h], forced};
    // Small problems cost less than a tuning run: the heuristic is as good as any there,
    // except that a product of few 16 x 16 tiles over a long K (a classifier's last layer, 64 x
    // 512 x 10: 4 workgroups stepping through K) runs split in 8 or 4.
    if (!autotune_enabled() || pr.batch * pr.m * pr.n * pr.k < (std::size_t{1} << 21)) {
        if (forced != 1 && h != kNaive && pr.k >= 256 &&
            ((pr.m + 15) / 16) * ((pr.n + 15) / 16) < 64)
            for (std::size_t s : {std::size_t{8}, std::size_t{4}})
                if (split_ok(pr, a, b, s)) return {kVariants[h], s};
        return {kVariants[h]};
    }
    // Candidates 0 .. kNumVariants - 1 are kVariants, the next kNumSplits the splits of K.
    const std::size_t best = tuned_choice(
        cx, "matmul-autotune.txt", kNumVariants + kNumSplits, pr, h,
        [&](std::size_t i) {
        if (i >= kNumVariants) return forced != 1 && split_ok(pr, a, b, kSplits[i - kNumVariants]);
        return fits(cx, kVariants[i]) && (!kVariants[i].vec4() || vec4);
        },
        [&](std::size_t i) {
            if (i >= kNumVariants)
                launch_split(cx, pr, a, b, out.shape, kSplits[i - kNumVariants]);
            else
                launch(cx, kVariants[i], pr, a, b, out, kF32);
        });
    // The bucket's winner: a split this call's K does not divide falls back to the heuristic's
    // kernel, one that needs vec4 loads the operands do not allow to its scalar twin.
    if (best >= kNumVariants) {
        const std::size_t s = kSplits[best - kNumVariants];
        return forced != 1 && split_ok(pr, a, b, s) ? Choice{kVariants[h], s}
                                                    : Choice{kVariants[h]};
    }
    return {kVariants[kVariants[best].vec4() && !vec4 ? scalar_twin(best) : best]};
}

}  // namespace

VT matmul(VT a, VT b) {
    const check::Matmul g = check::matmul(a, b);
    EMBER_CHECK(a.device == b.device, Device, "matmul: operands on different Vulkan devices (",
                a.device, " and ", b.device, ")");
    const std::size_t nb = g.batch.rank();
    EMBER_CHECK(nb <= 6, Shape, "matmul: at most 6 batch dims, got ", a.shape, " and ", b.shape);
    Problem pr;
    pr.m = g.m;
    pr.n = g.n;
    pr.k = g.k;
    pr.batch_shape = g.batch;
    // Batch strides per output batch dim (0 where an operand broadcasts).
    for (std::size_t i = 0; i < nb; ++i) {
        const bool has_a = i >= nb - g.ba, has_b = i >= nb - g.bb;
        const std::size_t da = has_a ? a.shape[i - (nb - g.ba)] : 1;
        const std::size_t db = has_b ? b.shape[i - (nb - g.bb)] : 1;
        pr.a_bs[i] = has_a && da != 1 ? a.strides[i - (nb - g.ba)] : 0;
        pr.b_bs[i] = has_b && db != 1 ? b.strides[i - (nb - g.bb)] : 0;
    }
    pr.batch = pr.batch_shape.num_elements();
    const Shape& out_shape = g.out;
    if (out_shape.num_elements() == 0) return empty(out_shape, a.dtype, a.device);
    if (pr.k == 0) return full(out_shape, Scalar(0), a.dtype, a.device);
    const DType dt = a.dtype;
    VT out = empty(out_shape, class_of(dt) == kF32 ? DType::F32 : DType::I64, a.device);
    Context& cx = ctx(a);
    if ((dt == DType::F16 && cx.info().cooperative_matrix) ||
        (dt == DType::BF16 && cx.info().coop_bf16)) {
        // 16-bit operands: tensor cores, f32 accumulation (the inputs are exact in 16 bits),
        // the products rounded to dt (f16 and bf16 tensors are f32 words holding rounded
        // values).
        const bool vec4 = vec4_ok(pr, a, b), bf16 = dt == DType::BF16;
        out.dtype = dt;
        const Kernel16 k = choose16(cx, pr, a, b, out, vec4, bf16);
        return launch16(cx, k, pr, a, b, std::move(out), vec4, bf16);
    }
    const Choice c = class_of(dt) == kF32 ? choose(cx, pr, a, b, out) : Choice{kVariants[kNaive]};
    if (c.split > 1)
        out = launch_split(cx, pr, a, b, out_shape, c.split);
    else
        launch(cx, c.v, pr, a, b, out, class_of(dt));
    // f16/bf16 operands compute in f32 and round once, as on the CPU.
    return out.dtype == dt ? out : cast(std::move(out), dt);
}

}  // namespace ember::detail::vk

// ---- VulkanBackend's ops on the kernels above ----
namespace ember {
namespace k = detail::vk;

auto VulkanBackend::float_matmul(FT a, FT b) -> FT {
    return k::matmul(std::move(a), std::move(b));
}
auto VulkanBackend::int_matmul(IT a, IT b) -> IT {
    return k::matmul(std::move(a), std::move(b));
}

}  // namespace ember
