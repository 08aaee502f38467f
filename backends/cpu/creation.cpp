// Creation, host transfer and casts.
#include <cmath>
#include <cstring>
#include <numbers>

#include "iter.hpp"
#include "kernels.hpp"
#include "parallel.hpp"

namespace ember::detail::cpu {

CpuTensor empty(const Shape& shape, DType dtype) {
    CpuTensor t;
    t.storage = allocate(std::max<std::size_t>(1, shape.num_elements()) * dtype_size(dtype));
    t.shape = shape;
    t.strides = contiguous_strides(shape);
    t.dtype = dtype;
    return t;
}

CpuTensor full(const Shape& shape, Scalar value, DType dtype) {
    CpuTensor t = empty(shape, dtype);
    visit_dtype(dtype, [&]<typename T>(TypeTag<T>) {
        const T v = is_float(dtype) ? elem_cast<T>(value.f) : elem_cast<T>(value.i);
        T* p = t.data<T>();
        parallel_for(shape.num_elements(), 1 << 18, [&](std::size_t b, std::size_t e) {
            std::fill(p + b, p + e, v);
        });
    });
    return t;
}

CpuTensor from_data(const TensorData& data, DType dtype) {
    CpuTensor t = empty(data.shape(), dtype);
    if (data.num_elements() == 0) return t;
    if (data.dtype() == dtype) {
        std::memcpy(t.storage->data, data.bytes().data(), data.bytes().size());
        return t;
    }
    visit_dtype(data.dtype(), [&]<typename S>(TypeTag<S>) {
        visit_dtype(dtype, [&]<typename D>(TypeTag<D>) {
            const auto* src = reinterpret_cast<const S*>(data.bytes().data());
            D* dst = t.data<D>();
            for (std::size_t i = 0, n = data.num_elements(); i < n; ++i)
                dst[i] = elem_cast<D>(src[i]);
        });
    });
    return t;
}

TensorData to_data(const CpuTensor& t) {
    TensorData out = TensorData::zeros(t.shape, t.dtype);
    if (t.num_elements() == 0) return out;
    if (t.is_contiguous()) {
        std::memcpy(out.bytes_mut().data(), t.bytes(), out.bytes().size());
        return out;
    }
    const CpuTensor c = contiguous(t);
    std::memcpy(out.bytes_mut().data(), c.bytes(), out.bytes().size());
    return out;
}

namespace {
// xoshiro256**: small, fast and good enough for initialisation and dropout masks.
struct Rng {
    std::uint64_t s[4];
    explicit Rng(std::uint64_t seed) { reseed(seed); }
    void reseed(std::uint64_t seed) {
        for (auto& x : s) {  // splitmix64 expands the seed
            seed += 0x9e3779b97f4a7c15ull;
            std::uint64_t z = seed;
            z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
            z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
            x = z ^ (z >> 31);
        }
    }
    static std::uint64_t rotl(std::uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
    std::uint64_t next() {
        const std::uint64_t r = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = rotl(s[3], 45);
        return r;
    }
    double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
};
Mutex g_rng_mu;
Rng g_rng(0x5eed);
}  // namespace

void seed(std::uint64_t s) {
    LockGuard lock(g_rng_mu);
    g_rng.reseed(s);
}

CpuTensor random(const Shape& shape, const Distribution& dist, DType dtype) {
    check::random(dist);
    CpuTensor t = empty(shape, dtype);
    const std::size_t n = shape.num_elements();
    LockGuard lock(g_rng_mu);
    visit_dtype(dtype, [&]<typename T>(TypeTag<T>) {
        T* p = t.data<T>();
        switch (dist.kind) {
            case Distribution::Kind::Default:
            case Distribution::Kind::Uniform: {
                const double lo = dist.kind == Distribution::Kind::Default ? 0.0 : dist.a;
                const double span = (dist.kind == Distribution::Kind::Default ? 1.0 : dist.b) - lo;
                for (std::size_t i = 0; i < n; ++i) {
                    double v = lo + span * g_rng.uniform();
                    if constexpr (!std::is_floating_point_v<T>) v = std::floor(v);
                    p[i] = elem_cast<T>(v);
                }
                break;
            }
            case Distribution::Kind::Normal:
                for (std::size_t i = 0; i < n; i += 2) {  // Box-Muller, two values per draw
                    const double u1 = 1.0 - g_rng.uniform(), u2 = g_rng.uniform();
                    const double r = std::sqrt(-2.0 * std::log(u1));
                    p[i] = elem_cast<T>(dist.a + dist.b * r * std::cos(2 * std::numbers::pi * u2));
                    if (i + 1 < n) p[i + 1] = elem_cast<T>(dist.a + dist.b * r * std::sin(2 * std::numbers::pi * u2));
                }
                break;
            case Distribution::Kind::Bernoulli: {
                // Branch-free: a dropout mask is a coin toss per element, and a branch on it
                // mispredicts half the time (8 ns per element, most of a small CNN's step).
                // uniform() < a holds exactly when the 53 drawn bits are below ⌈a·2⁵³⌉; the
                // sign of their difference is the result, which the compiler cannot turn back
                // into a jump.
                const auto threshold = static_cast<std::uint64_t>(std::ceil(dist.a * 0x1.0p53));
                for (std::size_t i = 0; i < n; ++i) {
                    const std::uint64_t keep = ((g_rng.next() >> 11) - threshold) >> 63;
                    p[i] = elem_cast<T>(static_cast<std::int64_t>(keep));
                }
                break;
            }
        }
    });
    return t;
}

CpuTensor arange(std::int64_t start, std::int64_t end, std::int64_t step, DType dtype) {
    // Checked in one place for every backend: INT64_MIN..INT64_MAX or a zero step is an error.
    const std::size_t n = ember::detail::arange_length(start, end, step, "arange");
    CpuTensor t = empty(Shape{n}, dtype);
    visit_dtype(dtype, [&]<typename T>(TypeTag<T>) {
        T* p = t.data<T>();
        for (std::size_t i = 0; i < n; ++i)
            // Unsigned: i * step may pass INT64_MAX on the way to a value that fits.
            p[i] = elem_cast<T>(static_cast<std::int64_t>(static_cast<std::uint64_t>(start) +
                                                          static_cast<std::uint64_t>(i) *
                                                              static_cast<std::uint64_t>(step)));
    });
    return t;
}

namespace {
// Copies `src` (any strides) into the contiguous `dst` of the same shape, converting elements.
template <typename S, typename D>
void copy_convert(const CpuTensor& src, const CpuTensor& dst) {
    const Strides dst_strides = contiguous_strides(src.shape);
    auto it = make_iter<2>(src.shape, {&dst_strides, &src.strides});
    const S* in = src.data<S>();
    D* out = dst.data<D>();
    parallel_for(it.rows(), std::max<std::size_t>(1, (1 << 16) / std::max<std::size_t>(1, it.inner())),
                 [&](std::size_t b, std::size_t e) {
        for_each_run(it, b, e, [&](const auto& off, std::size_t n, const auto& st) {
            D* o = out + off[0];
            const S* i = in + off[1];
            if (st[1] == 1) {
                for (std::size_t k = 0; k < n; ++k) o[k] = elem_cast<D>(i[k]);
            } else {
                for (std::size_t k = 0; k < n; ++k) o[k] = elem_cast<D>(i[static_cast<std::int64_t>(k) * st[1]]);
            }
        });
    });
}
}  // namespace

CpuTensor contiguous(CpuTensor t) {
    if (t.is_contiguous()) return t;
    CpuTensor out = empty(t.shape, t.dtype);
    if (t.num_elements() == 0) return out;
    visit_dtype(t.dtype, [&]<typename T>(TypeTag<T>) { copy_convert<T, T>(t, out); });
    return out;
}

CpuTensor cast(CpuTensor t, DType dtype) {
    if (t.dtype == dtype) return t;
    CpuTensor out = empty(t.shape, dtype);
    if (t.num_elements() == 0) return out;
    visit_dtype(t.dtype, [&]<typename S>(TypeTag<S>) {
        visit_dtype(dtype, [&]<typename D>(TypeTag<D>) { copy_convert<S, D>(t, out); });
    });
    return out;
}

}  // namespace ember::detail::cpu
