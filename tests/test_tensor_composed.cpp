// The composed tensor ops (include/ember/tensor/composed.hpp and linalg.hpp) on every backend
// stack: values against PyTorch (tests/fixtures/gen_tensor_ops.py, the "cmp_" cases of
// tensor_ops.json), gradients against PyTorch and float64 finite differences
// (tests/fixtures/gen_autodiff_ops.py → autodiff_composed.json), errors by class and message.
#include <array>
#include <ember/tensor/linalg.hpp>
#include <ember/tensor/sampling.hpp>
#include <set>
#include <string>
#include <vector>

#include "grad_check.hpp"
#include "op_test.hpp"

namespace test_tensor_composed {

using Catch::Contains;
using ember::Tensor;

namespace {
/// The composed op `name` applied to fixture input 0 must give fixture output 0.
template <typename B, typename F>
void check_unary(const char* name, F f) {
    INFO(name);
    auto fx = fixture((std::string("cmp_") + name).c_str());
    EXPECT_CLOSE(fx.output(0), f(fx.tensor<B, 2>(0)));
}
}  // namespace

TEMPLATE_LIST_TEST_CASE("composed: trigonometric and hyperbolic functions", "[composed]",
                        ember::test::TestBackendsWithDispatch) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    using T = Tensor<B, 2>;
    check_unary<B>("tan", [](const T& x) { return ember::tan(x); });
    check_unary<B>("sinh", [](const T& x) { return ember::sinh(x); });
    check_unary<B>("cosh", [](const T& x) { return ember::cosh(x); });
    check_unary<B>("asinh", [](const T& x) { return ember::asinh(x); });
    check_unary<B>("acosh", [](const T& x) { return ember::acosh(x); });
    check_unary<B>("atanh", [](const T& x) { return ember::atanh(x); });
    check_unary<B>("atan", [](const T& x) { return ember::atan(x); });
    check_unary<B>("asin", [](const T& x) { return ember::asin(x); });
    check_unary<B>("acos", [](const T& x) { return ember::acos(x); });
    check_unary<B>("trunc", [](const T& x) { return ember::trunc(x); });
    check_unary<B>("deg2rad", [](const T& x) { return ember::deg2rad(x); });
    check_unary<B>("rad2deg", [](const T& x) { return ember::rad2deg(x); });
    check_unary<B>("square", [](const T& x) { return square(x); });  // found by ADL

    auto a2 = fixture("cmp_atan2");
    EXPECT_CLOSE(a2.output(0), ember::atan2(a2.tensor<B, 2>(0), a2.tensor<B, 2>(1)));
    EXPECT_CLOSE(a2.output(1), ember::atan2(a2.tensor<B, 2>(2), a2.tensor<B, 2>(3)));
    auto h = fixture("cmp_hypot");
    EXPECT_CLOSE(h.output(0), ember::hypot(h.tensor<B, 2>(0), h.tensor<B, 2>(1)));
    EXPECT_CLOSE(h.output(1), ember::hypot(h.tensor<B, 2>(0), h.tensor<B, 2>(2)));
    auto fm = fixture("cmp_fmod");
    EXPECT_CLOSE(fm.output(0), ember::fmod(fm.tensor<B, 2>(0), fm.tensor<B, 2>(1)));
    EXPECT_CLOSE(fm.output(1), ember::fmod_scalar(fm.tensor<B, 2>(0), fm.param("scalar")));
    auto sp = fixture("cmp_is_inf_finite");
    EXPECT_SAME(sp.output(0), ember::is_inf(sp.tensor<B, 2>(0)));
    EXPECT_SAME(sp.output(1), ember::is_finite(sp.tensor<B, 2>(0)));
    auto si = fixture("cmp_square_int");
    EXPECT_SAME(si.output(0), ember::square(si.tensor<B, 2, Int>(0)));
}

TEMPLATE_LIST_TEST_CASE("composed: reductions over several dims", "[composed]",
                        ember::test::TestBackendsWithDispatch) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    auto f = fixture("cmp_reduce_dims");
    auto x = f.tensor<B, 3>(0);
    EXPECT_CLOSE(f.output(0), ember::sum_dims(x, {0, 2}));
    EXPECT_CLOSE(f.output(1), ember::mean_dims(x, {0, -1}));
    EXPECT_CLOSE(f.output(2), ember::prod_dims(x, {0, 2}));
    EXPECT_CLOSE(f.output(3), ember::max_dims(x, {0, 2}));
    EXPECT_CLOSE(f.output(4), ember::min_dims(x, {2, 0}));
    EXPECT_CLOSE(f.output(5), ember::max_abs_dims(x, {0, 2}));
    EXPECT_CLOSE(f.output(6), ember::max_abs(x));
    EXPECT_CLOSE(f.output(7), ember::max_abs_dim(x, 1));
    EXPECT_CLOSE(f.output(8), ember::sum_dims_squeeze<1>(x, {0, 2}));
    EXPECT_CLOSE(f.output(9), ember::sum_dims(x, {2, 1}));
    EXPECT_CLOSE(f.input(0), ember::sum_dims(x, {}));
    auto fi = fixture("cmp_reduce_dims_int");
    auto xi = fi.tensor<B, 3, Int>(0);
    EXPECT_SAME(fi.output(0), ember::sum_dims(xi, {0, 2}));
    EXPECT_SAME(fi.output(1), ember::max_dims(xi, {1, 2}));
    EXPECT_SAME(fi.output(2), ember::min_dims(xi, {0}));
    EXPECT_SAME(fi.output(3), ember::max_abs_dims(xi, {0, 2}));
    SECTION("squeeze_dims") {
        auto y = Tensor<B, 4>::zeros(Shape{2, 1, 3, 1});
        CHECK(ember::squeeze_dims<2>(y, {1, -1}).shape() == Shape{2, 3});
        CHECK(ember::squeeze_dims<2>(y, {}).shape() == Shape{2, 3});
        CHECK(ember::squeeze_dims<3>(y, {3}).shape() == Shape{2, 1, 3});
    }
}

TEMPLATE_LIST_TEST_CASE("composed: cumulative ops", "[composed]",
                        ember::test::TestBackendsWithDispatch) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    auto f = fixture("cmp_cumulative");
    auto c = f.tensor<B, 2>(0), p = f.tensor<B, 2>(1);
    EXPECT_CLOSE(f.output(0), ember::cumsum(c, 1));
    EXPECT_CLOSE(f.output(1), ember::cumprod(c, 1));
    EXPECT_CLOSE(f.output(2), ember::cummax(c, 1));
    EXPECT_CLOSE(f.output(3), ember::cummin(c, -1));
    EXPECT_CLOSE(f.output(4), ember::cumsum(p, 0));
    EXPECT_CLOSE(f.output(5), ember::cumprod(p, 0));
    EXPECT_CLOSE(f.output(6), ember::cummax(p, -2));
    auto fi = fixture("cmp_cumulative_int");
    auto ci = fi.tensor<B, 2, Int>(0);
    EXPECT_SAME(fi.output(0), ember::cumsum(ci, 1));
    EXPECT_SAME(fi.output(1), ember::cumprod(ci, 1));
    EXPECT_SAME(fi.output(2), ember::cummax(ci, 1));
    EXPECT_SAME(fi.output(3), ember::cummin(ci, 1));
    SECTION("a dim of size 0 or 1 is returned as it is") {
        auto z = Tensor<B, 2>::zeros(Shape{3, 0});
        CHECK(ember::cumsum(z, 1).shape() == Shape{3, 0});
        EXPECT_CLOSE(c.narrow(1, 0, 1).into_data(), ember::cumprod(c.narrow(1, 0, 1), 1));
    }
}

TEMPLATE_LIST_TEST_CASE("composed: median and argtopk", "[composed]",
                        ember::test::TestBackendsWithDispatch) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    auto f = fixture("cmp_median");
    auto m = f.tensor<B, 2>(0), m5 = f.tensor<B, 2>(1);
    auto [v, i] = ember::median_with_indices(m, 1);
    EXPECT_CLOSE(f.output(0), v);
    EXPECT_SAME(f.output(1), i);
    auto [v0, i0] = ember::stats::median_with_indices(m5, 0);
    EXPECT_CLOSE(f.output(2), v0);
    EXPECT_SAME(f.output(3), i0);
    EXPECT_CLOSE(f.output(4), ember::stats::median(m5, -1));
    EXPECT_SAME(f.output(6), ember::argtopk(m, 2, 1));
    EXPECT_SAME(f.output(7), ember::argtopk(m5, 3, 0));
}

TEMPLATE_LIST_TEST_CASE("composed: split, roll, take, slice_fill, iter_dim", "[composed]",
                        ember::test::TestBackendsWithDispatch) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    auto fs = fixture("cmp_split");
    auto s = fs.tensor<B, 2>(0);
    auto parts = ember::split(s, 3, 1);
    REQUIRE(parts.size() == 3);
    for (std::size_t k = 0; k < 3; ++k) EXPECT_CLOSE(fs.output(k), parts[k]);
    auto sized = ember::split_with_sizes(s, {1, 4, 2}, -1);
    REQUIRE(sized.size() == 3);
    for (std::size_t k = 0; k < 3; ++k) EXPECT_CLOSE(fs.output(3 + k), sized[k]);
    auto rows = ember::iter_dim(s, 0);
    REQUIRE(rows.size() == 3);
    for (std::size_t k = 0; k < 3; ++k) EXPECT_CLOSE(s.narrow(0, k, 1).into_data(), rows[k]);

    auto fr = fixture("cmp_roll");
    auto r = fr.tensor<B, 2>(0);
    EXPECT_CLOSE(fr.output(0), ember::roll(r, {2, -1}, {0, 1}));
    EXPECT_CLOSE(fr.output(1), ember::roll_dim(r, 5, 1));
    EXPECT_CLOSE(fr.output(2), ember::roll_dim(r, -7, -1));
    EXPECT_CLOSE(fr.output(3), ember::roll_dim(r, 1, 0));
    EXPECT_CLOSE(fr.input(0), ember::roll_dim(r, 4, 1));

    auto ft = fixture("cmp_take");
    auto tx = ft.tensor<B, 2>(0);
    auto ti = ft.tensor<B, 2, Int>(1);
    EXPECT_CLOSE(ft.output(0), ember::take<3>(tx, 1, ti));
    EXPECT_CLOSE(ft.output(1), ember::take<3>(tx, 0, ti));

    auto ff = fixture("cmp_slice_fill");
    auto x = ff.tensor<B, 2>(0);
    EXPECT_CLOSE(ff.output(0), ember::slice_fill(x, {Slice{0, 2}, Slice{1, 3}}, 7.5));
    EXPECT_CLOSE(ff.output(1), ember::slice_fill(x, {Slice{0}, Slice{0, kEnd, 2}}, -1.0));
}

TEMPLATE_LIST_TEST_CASE("composed: cross, dot and linalg", "[composed][linalg]",
                        ember::test::TestBackendsWithDispatch) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    namespace la = ember::linalg;
    auto fc = fixture("cmp_cross");
    EXPECT_CLOSE(fc.output(0), ember::cross(fc.tensor<B, 2>(0), fc.tensor<B, 2>(1), 1));
    EXPECT_CLOSE(fc.output(1), ember::cross(fc.tensor<B, 2>(2), fc.tensor<B, 2>(3), 0));
    EXPECT_CLOSE(fc.output(2), ember::cross(fc.tensor<B, 2>(4), fc.tensor<B, 2>(1), -1));
    auto fd = fixture("cmp_dot");
    EXPECT_CLOSE(fd.output(0), ember::dot(fd.tensor<B, 1>(0), fd.tensor<B, 1>(1)));
    auto fdi = fixture("cmp_dot_int");
    EXPECT_SAME(fdi.output(0), ember::dot(fdi.tensor<B, 1, Int>(0), fdi.tensor<B, 1, Int>(1)));

    auto fg = fixture("cmp_diag_trace");
    auto sq = fg.tensor<B, 2>(0);
    auto bt = fg.tensor<B, 3>(1);
    EXPECT_CLOSE(fg.output(0), la::diag<1>(sq));
    EXPECT_CLOSE(fg.output(1), la::diag<2>(bt));
    EXPECT_CLOSE(fg.output(2), la::trace<1>(sq));
    EXPECT_CLOSE(fg.output(3), la::trace<2>(bt));

    auto fn = fixture("cmp_vector_norm");
    auto nv = fn.tensor<B, 2>(0);
    const double inf = std::numeric_limits<double>::infinity();
    const double ords[] = {0.0, 1.0, 2.0, 3.0, 0.5, inf, -inf};
    for (std::size_t k = 0; k < 7; ++k) {
        INFO("p = " << ords[k]);
        EXPECT_CLOSE(fn.output(k), la::vector_norm(nv, ords[k], 1));
    }
    EXPECT_CLOSE(fn.output(0), la::l0_norm(nv, 1));
    EXPECT_CLOSE(fn.output(1), la::l1_norm(nv, 1));
    EXPECT_CLOSE(fn.output(2), la::l2_norm(nv, -1));
    EXPECT_CLOSE(fn.output(3), la::lp_norm(nv, 3.0, 1));
    EXPECT_CLOSE(fn.output(5), la::max_abs_norm(nv, 1));
    EXPECT_CLOSE(fn.output(6), la::min_abs_norm(nv, 1));
    EXPECT_CLOSE(fn.output(7), la::vector_normalize(nv, 2.0, 1));
    EXPECT_CLOSE(fn.output(8), la::vector_normalize(nv, 1.0, 0));

    auto fm = fixture("cmp_matvec");
    EXPECT_CLOSE(fm.output(0), la::matvec(fm.tensor<B, 2>(0), fm.tensor<B, 1>(1)));
    EXPECT_CLOSE(fm.output(1), la::matvec(fm.tensor<B, 3>(2), fm.tensor<B, 2>(3)));
    auto fo = fixture("cmp_outer");
    EXPECT_CLOSE(fo.output(0), la::outer<2>(fo.tensor<B, 1>(0), fo.tensor<B, 1>(1)));
    EXPECT_CLOSE(fo.output(1), la::outer<3>(fo.tensor<B, 2>(2), fo.tensor<B, 2>(3)));
    auto fs = fixture("cmp_cosine_similarity");
    auto cx = fs.tensor<B, 2>(0);
    EXPECT_CLOSE(fs.output(0), la::cosine_similarity(cx, fs.tensor<B, 2>(1), 1));
    EXPECT_CLOSE(fs.output(1), la::cosine_similarity(cx, fs.tensor<B, 2>(2), -1));
    EXPECT_CLOSE(fs.output(2), la::cosine_similarity(cx, fs.tensor<B, 2>(1), 0));
    auto fv = fixture("cmp_cov");
    auto cv = fv.tensor<B, 2>(0);
    EXPECT_CLOSE(fv.output(0), ember::cov(cv));
    EXPECT_CLOSE(fv.output(1), ember::cov(cv, 1, 0));
    EXPECT_CLOSE(fv.output(2), ember::cov(cv, 0));
}

TEMPLATE_LIST_TEST_CASE("composed: meshgrid and windows", "[composed][grid][signal]",
                        ember::test::TestBackendsWithDispatch) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    using ember::grid::GridIndexing;
    auto f = fixture("cmp_meshgrid");
    std::array<Tensor<B, 1>, 3> axes{f.tensor<B, 1>(0), f.tensor<B, 1>(1), f.tensor<B, 1>(2)};
    auto ij = ember::grid::meshgrid(axes);
    auto xy = ember::grid::meshgrid(axes, GridIndexing::Cartesian);
    for (std::size_t k = 0; k < 3; ++k) {
        EXPECT_CLOSE(f.output(k), ij[k]);
        EXPECT_CLOSE(f.output(3 + k), xy[k]);
    }
    std::array<Tensor<B, 1, Int>, 2> ints{f.tensor<B, 1, Int>(3), f.tensor<B, 1, Int>(4)};
    EXPECT_SAME(f.output(6), ember::grid::meshgrid_stack<3>(ints));
    EXPECT_SAME(f.output(7), ember::grid::meshgrid_stack<3>(ints, GridIndexing::Cartesian));

    auto w = fixture("cmp_windows");
    const std::pair<std::size_t, bool> sizes[] = {{8, true}, {7, false}, {1, true}, {0, true}};
    for (std::size_t k = 0; k < 4; ++k) {
        auto [n, periodic] = sizes[k];
        INFO("size " << n << (periodic ? " periodic" : " symmetric"));
        EXPECT_CLOSE(w.output(k), ember::signal::hann_window<B>(n, periodic));
        EXPECT_CLOSE(w.output(4 + k), ember::signal::hamming_window<B>(n, periodic));
        EXPECT_CLOSE(w.output(8 + k), ember::signal::blackman_window<B>(n, periodic));
    }
}

TEMPLATE_LIST_TEST_CASE("composed: unsqueeze_dims, unfold, one_hot_fill, gather_nd, scatter_nd",
                        "[composed]", ember::test::TestBackendsWithDispatch) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    auto y = Tensor<B, 2>::zeros(Shape{2, 3});
    CHECK(ember::unsqueeze_dims<4>(y, {0, -1}).shape() == Shape{1, 2, 3, 1});
    CHECK(ember::unsqueeze_dims<4>(y, {1, 2}).shape() == Shape{2, 1, 1, 3});
    CHECK(ember::unsqueeze_dims<2>(y, {}).shape() == Shape{2, 3});

    auto fu = fixture("cmp_unfold");
    auto uf = fu.tensor<B, 2>(0);
    EXPECT_CLOSE(fu.output(0), ember::unfold<3>(uf, 1, 3, 2));
    EXPECT_CLOSE(fu.output(1), ember::unfold<3>(uf, 1, 7, 1));
    EXPECT_CLOSE(fu.output(2), ember::unfold<3>(uf, 0, 1, 1));
    EXPECT_CLOSE(fu.output(3), ember::unfold<3>(uf, -1, 2, 3));

    auto fo = fixture("cmp_one_hot_fill");
    auto oh = fo.tensor<B, 2, Int>(0);
    EXPECT_CLOSE(fo.output(0), ember::one_hot_fill<3>(oh, 4, 2.5, -1.0));
    EXPECT_CLOSE(fo.output(1), ember::one_hot_fill<3>(oh, 4, 2.5, -1.0, 0));
    EXPECT_CLOSE(fo.output(2), ember::one_hot_fill<3>(oh, 4, 2.5, -1.0, 1));

    auto fg = fixture("cmp_gather_scatter_nd");
    auto gd = fg.tensor<B, 3>(0);
    auto gi = fg.tensor<B, 3, Int>(1);
    auto gi1 = fg.tensor<B, 2, Int>(2);
    EXPECT_CLOSE(fg.output(0), ember::gather_nd<3>(gd, gi));
    EXPECT_CLOSE(fg.output(1), ember::gather_nd<3>(gd, gi1));
    EXPECT_CLOSE(fg.output(2), ember::scatter_nd(gd, gi, fg.tensor<B, 3>(3)));
    EXPECT_CLOSE(fg.output(3), ember::scatter_nd(gd, gi1, fg.tensor<B, 3>(4)));
}

TEMPLATE_LIST_TEST_CASE("composed: rfft and irfft", "[composed][signal]",
                        ember::test::TestBackendsWithDispatch) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    auto f = fixture("cmp_fft");
    auto [re8, im8] = ember::signal::rfft(f.tensor<B, 2>(0), 1);
    EXPECT_CLOSE(f.output(0), re8);
    EXPECT_CLOSE(f.output(1), im8);
    auto [re7, im7] = ember::signal::rfft(f.tensor<B, 2>(1), 0);
    EXPECT_CLOSE(f.output(2), re7);
    EXPECT_CLOSE(f.output(3), im7);
    auto sr = f.tensor<B, 2>(2), si = f.tensor<B, 2>(3);
    EXPECT_CLOSE(f.output(4), ember::signal::irfft(sr, si, 1));
    EXPECT_CLOSE(f.output(5), ember::signal::irfft(sr, si, 1, 9));
    EXPECT_CLOSE(f.output(6), ember::signal::irfft(sr, si, -1, 4));
    EXPECT_CLOSE(f.output(7), ember::signal::irfft(sr, si, 1, 12));
    SECTION("stft") {
        auto fs = fixture("cmp_stft");
        auto st = fs.tensor<B, 2>(0);
        auto [r1, i1] = ember::signal::stft<3>(st, 8, 3, ember::signal::hann_window<B>(8));
        EXPECT_CLOSE(fs.output(0), r1);
        EXPECT_CLOSE(fs.output(1), i1);
        auto [r2, i2] = ember::signal::stft<3>(st, 6, 4, std::nullopt, false);
        EXPECT_CLOSE(fs.output(2), r2);
        EXPECT_CLOSE(fs.output(3), i2);
    }
    SECTION("cfft") {
        auto fc = fixture("cmp_cfft");
        auto cr = fc.tensor<B, 2>(0), ci = fc.tensor<B, 2>(1);
        auto [r1, i1] = ember::signal::cfft(cr, ci, 1);
        EXPECT_CLOSE(fc.output(0), r1);
        EXPECT_CLOSE(fc.output(1), i1);
        auto [r0, i0] = ember::signal::cfft(cr, ci, 0);
        EXPECT_CLOSE(fc.output(2), r0);
        EXPECT_CLOSE(fc.output(3), i0);
    }
    SECTION("cross_entropy_with_logits") {
        auto fl = fixture("cmp_cross_entropy_with_logits");
        EXPECT_CLOSE(fl.output(0), ember::loss::cross_entropy_with_logits(fl.tensor<B, 2>(0),
                                                                          fl.tensor<B, 2>(1)));
    }
    SECTION("istft") {
        auto fi = fixture("cmp_istft");
        auto r1 = fi.tensor<B, 3>(0), i1 = fi.tensor<B, 3>(1);
        auto hann = ember::signal::hann_window<B>(8);
        EXPECT_CLOSE(fi.output(0), ember::signal::istft<2>(r1, i1, 8, 3, hann));
        EXPECT_CLOSE(fi.output(1), ember::signal::istft<2>(r1, i1, 8, 3, hann, true, 17));
        EXPECT_CLOSE(fi.output(2), ember::signal::istft<2>(r1, i1, 8, 3, hann, true, 24));
        EXPECT_CLOSE(fi.output(3), ember::signal::istft<2>(fi.tensor<B, 3>(2), fi.tensor<B, 3>(3),
                                                           6, 4, std::nullopt, false));
    }
    SECTION("pad with modes") {
        auto fp = fixture("cmp_pad_modes");
        auto x = fp.tensor<B, 3>(0);
        using ember::PadMode;
        EXPECT_CLOSE(fp.output(0), ember::pad(x, {2, 1}, PadMode::Reflect));
        EXPECT_CLOSE(fp.output(1), ember::pad(x, {1, 3, 2, 0}, PadMode::Reflect));
        EXPECT_CLOSE(fp.output(2), ember::pad(x, {3, 0, 1, 2}, PadMode::Replicate));
        EXPECT_CLOSE(fp.output(3), ember::pad(x, {1, 2, 0, 1}, PadMode::Constant, -0.5));
        EXPECT_CLOSE(fp.output(4), ember::pad(x, {0, 0, 2, 2}, PadMode::Replicate));
    }
    SECTION("irfft inverts rfft") {
        auto x = f.tensor<B, 2>(0);
        auto [re, im] = ember::signal::rfft(x, 1);
        EXPECT_CLOSE(x.into_data(), ember::signal::irfft(re, im, 1, 8));
    }
}

TEMPLATE_LIST_TEST_CASE("composed: outer_dim, lu, det, affine_grid_2d", "[composed][linalg]",
                        ember::test::TestBackendsWithDispatch) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    namespace la = ember::linalg;
    auto fo = fixture("cmp_outer_dim");
    EXPECT_CLOSE(fo.output(0), la::outer_dim<3>(fo.tensor<B, 2>(0), fo.tensor<B, 2>(1), 0));

    auto f = fixture("cmp_lu_det");
    auto a4 = f.tensor<B, 2>(0);
    auto ab = f.tensor<B, 3>(1);
    auto l4 = la::lu(a4);
    EXPECT_CLOSE(f.output(0), l4.p);
    EXPECT_CLOSE(f.output(1), l4.l);
    EXPECT_CLOSE(f.output(2), l4.u);
    auto lb = la::lu(ab);
    EXPECT_CLOSE(f.output(3), lb.p);
    EXPECT_CLOSE(f.output(4), lb.l);
    EXPECT_CLOSE(f.output(5), lb.u);
    EXPECT_CLOSE(f.output(6), la::det<1>(a4));
    EXPECT_CLOSE(f.output(7), la::det<2>(ab));
    EXPECT_CLOSE(a4.into_data(), l4.p.matmul(l4.l).matmul(l4.u));

    auto fg = fixture("cmp_affine_grid");
    auto th = fg.tensor<B, 3>(0);
    EXPECT_CLOSE(fg.output(0), ember::grid::affine_grid_2d(th, {2, 3, 4, 5}));
    EXPECT_CLOSE(fg.output(1), ember::grid::affine_grid_2d(th, {2, 3, 4, 5}, true));
    EXPECT_CLOSE(fg.output(2), ember::grid::affine_grid_2d(th, {2, 1, 1, 3}, true));
}

TEMPLATE_LIST_TEST_CASE("composed: grid_sample_2d", "[composed][grid_sample]",
                        ember::test::TestBackendsWithDispatch) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    using ember::GridSampleMode;
    using ember::GridSamplePadding;
    auto f = fixture("cmp_grid_sample");
    auto x = f.tensor<B, 4>(0), g = f.tensor<B, 4>(1);
    std::size_t k = 0;
    for (auto mode : {GridSampleMode::Bilinear, GridSampleMode::Nearest})
        for (auto pad :
             {GridSamplePadding::Zeros, GridSamplePadding::Border, GridSamplePadding::Reflection})
            for (bool ac : {false, true}) {
                INFO("case " << k << ": mode " << static_cast<int>(mode) << ", padding "
                             << static_cast<int>(pad) << ", align_corners " << ac);
                EXPECT_CLOSE(f.output(k++), ember::grid_sample_2d(x, g, {mode, pad, ac}));
            }
}

TEMPLATE_LIST_TEST_CASE("composed: categorical sampling", "[composed][random]",
                        ember::test::TestBackendsWithDispatch) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    // Rows with one non-zero weight always give that class; zero weights are never drawn.
    auto w = Tensor<B, 1>::from_floats({0, 0, 3, 0, 1, 0, 0, 0, 0, 0, 0, 2})
                 .template reshape<2>(Shape{3, 4});
    std::vector<std::int64_t> fixed;
    for (std::int64_t r : {2, 0, 3})
        for (int k = 0; k < 50; ++k) fixed.push_back(r);
    EXPECT_SAME(TensorData(fixed, Shape{3, 50}), ember::categorical(w, 50));
    // Frequencies: 20000 draws from weights (1, 2.5, 0, 1.5) are within 8 standard deviations
    // (at most ~0.03) of (0.2, 0.5, 0, 0.3).
    const std::size_t n = 20000;
    auto p = Tensor<B, 1>::from_floats({1.0f, 2.5f, 0.0f, 1.5f}).template reshape<2>(Shape{1, 4});
    auto draws = ember::categorical(p, n).into_data().template to_vec<std::int64_t>();
    REQUIRE(draws.size() == n);
    std::array<double, 4> freq{};
    std::size_t outside = 0;
    for (auto d : draws) {
        if (d < 0 || d >= 4)
            ++outside;
        else
            freq[static_cast<std::size_t>(d)] += 1.0 / static_cast<double>(n);
    }
    CHECK(outside == 0);
    CHECK(freq[0] == Approx(0.2).margin(0.03));
    CHECK(freq[1] == Approx(0.5).margin(0.03));
    CHECK(freq[2] == 0.0);
    CHECK(freq[3] == Approx(0.3).margin(0.03));
    CHECK(ember::categorical(p, 0).shape() == Shape{1, 0});
}

TEMPLATE_LIST_TEST_CASE("composed: misuse is an ember Error naming the op and the shapes",
                        "[composed][errors]", ember::test::TestBackendsWithDispatch) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    auto a = Tensor<B, 2>::ones(Shape{2, 3});
    auto b = Tensor<B, 2>::ones(Shape{4, 3});
    // (A macro, not a variable: a combined Catch2 matcher keeps references to its parts.)
#define SHAPES Contains("[2, 3]") && Contains("[4, 3]")
    // Operands that do not broadcast.
    REQUIRE_THROWS_AS(ember::atan2(a, b), ember::ShapeError);
    REQUIRE_THROWS_WITH(ember::atan2(a, b), Contains("atan2") && SHAPES);
    REQUIRE_THROWS_WITH(ember::hypot(a, b), Contains("hypot") && SHAPES);
    REQUIRE_THROWS_WITH(ember::fmod(a, b), Contains("fmod") && SHAPES);
    REQUIRE_THROWS_WITH(ember::cross(b.narrow(0, 0, 2), b, 1), Contains("cross") && SHAPES);
    REQUIRE_THROWS_WITH(ember::linalg::cosine_similarity(a, b, 1),
                        Contains("cosine_similarity") && SHAPES);
    // Dims out of range or listed twice.
    REQUIRE_THROWS_AS(ember::cumsum(a, 2), ember::DimError);
    REQUIRE_THROWS_WITH(ember::cumsum(a, 2), Contains("cumsum"));
    REQUIRE_THROWS_WITH(ember::cumprod(a, -3), Contains("cumprod"));
    REQUIRE_THROWS_AS(ember::sum_dims(a, {1, -1}), ember::DimError);
    REQUIRE_THROWS_WITH(ember::sum_dims(a, {1, -1}), Contains("sum_dims") && Contains("[2, 3]"));
    REQUIRE_THROWS_WITH(ember::roll_dim(a, 1, 5), Contains("roll_dim"));
    REQUIRE_THROWS_AS(ember::sum_dims_squeeze<1>(a, {0, 1}), ember::DimError);
    REQUIRE_THROWS_AS(ember::squeeze_dims<1>(a, {0}), ember::ShapeError);
    REQUIRE_THROWS_WITH(ember::squeeze_dims<1>(a, {0}),
                        Contains("squeeze_dims") && Contains("[2, 3]"));
    // Empty dims have no maximum or median.
    auto e = Tensor<B, 2>::zeros(Shape{2, 0});
    REQUIRE_THROWS_AS(ember::max_dims(e, {1}), ember::Error);
    REQUIRE_THROWS_WITH(ember::median(e, 1), Contains("median") && Contains("[2, 0]"));
    REQUIRE_THROWS_WITH(ember::max_abs(e), Contains("max_abs"));
    // Sizes and arguments.
    REQUIRE_THROWS_AS(ember::split(a, 0, 1), ember::ArgumentError);
    REQUIRE_THROWS_WITH(ember::split(a, 0, 1), Contains("split") && Contains("[2, 3]"));
    REQUIRE_THROWS_AS(ember::split_with_sizes(a, {1, 1}, 1), ember::ShapeError);
    REQUIRE_THROWS_WITH(ember::split_with_sizes(a, {1, 1}, 1),
                        Contains("split_with_sizes") && Contains("[1, 1]") && Contains("[2, 3]"));
    REQUIRE_THROWS_AS(ember::roll(a, {1, 2}, {0}), ember::ArgumentError);
    REQUIRE_THROWS_WITH(ember::roll(a, {1, 2}, {0}), Contains("roll"));
    REQUIRE_THROWS_AS(ember::cross(a, a, 0), ember::ShapeError);
    REQUIRE_THROWS_WITH(ember::cross(a, a, 0), Contains("cross") && Contains("size 3"));
    auto v3 = Tensor<B, 1>::ones(Shape{3}), v4 = Tensor<B, 1>::ones(Shape{4});
    REQUIRE_THROWS_AS(ember::dot(v3, v4), ember::ShapeError);
    REQUIRE_THROWS_WITH(ember::dot(v3, v4), Contains("dot") && Contains("[3]") && Contains("[4]"));
    REQUIRE_THROWS_WITH(ember::linalg::matvec(a, v4),
                        Contains("matvec") && Contains("[2, 3]") && Contains("[4]"));
    REQUIRE_THROWS_AS(ember::linalg::vector_norm(a, std::nan(""), 1), ember::ArgumentError);
    REQUIRE_THROWS_AS(ember::cov(Tensor<B, 2>::ones(Shape{1, 3}), 0), ember::ArgumentError);
    REQUIRE_THROWS_WITH(ember::cov(Tensor<B, 2>::ones(Shape{2, 1})),
                        Contains("cov") && Contains("[2, 1]"));
    auto idx = Tensor<B, 1, Int>::from_ints({0, 5});
    REQUIRE_THROWS_AS(ember::take<2>(a, 1, idx), ember::Error);
    const std::vector<Slice> three(3);
    REQUIRE_THROWS_AS(ember::slice_fill(a, std::span<const Slice>(three), 0.0), ember::DimError);
    // The second batch.
    REQUIRE_THROWS_AS(ember::unsqueeze_dims<3>(a, {0, 0}), ember::DimError);
    REQUIRE_THROWS_WITH(ember::unsqueeze_dims<4>(a, {0}),
                        Contains("unsqueeze_dims") && Contains("[2, 3]"));
    REQUIRE_THROWS_AS(ember::unfold<3>(a, 1, 4, 1), ember::ShapeError);
    REQUIRE_THROWS_WITH(ember::unfold<3>(a, 1, 4, 1), Contains("unfold") && Contains("[2, 3]"));
    REQUIRE_THROWS_AS(ember::unfold<3>(a, 1, 2, 0), ember::ArgumentError);
    auto tuples = Tensor<B, 1, Int>::from_ints({0, 3, 1, 0}).template reshape<2>(Shape{2, 2});
    REQUIRE_THROWS_AS(ember::gather_nd<1>(a, tuples), ember::IndexError);
    REQUIRE_THROWS_WITH(ember::gather_nd<1>(a, tuples),
                        Contains("gather_nd") && Contains("[2, 3]") && Contains("[2, 2]"));
    REQUIRE_THROWS_AS(ember::gather_nd<2>(a, tuples), ember::DimError);
    auto ok = Tensor<B, 1, Int>::from_ints({0, 2, 1, 0}).template reshape<2>(Shape{2, 2});
    REQUIRE_THROWS_AS(ember::scatter_nd(a, ok, Tensor<B, 1>::ones(Shape{3})), ember::ShapeError);
    REQUIRE_THROWS_WITH(ember::scatter_nd(a, ok, Tensor<B, 1>::ones(Shape{3})),
                        Contains("scatter_nd") && Contains("[3]") && Contains("[2, 3]"));
    REQUIRE_THROWS_AS(ember::signal::irfft(a, b, 1), ember::ShapeError);
    REQUIRE_THROWS_WITH(ember::signal::irfft(a, b, 1), Contains("irfft") && SHAPES);
    REQUIRE_THROWS_AS(ember::signal::rfft(e, 1), ember::ShapeError);
    REQUIRE_THROWS_AS(ember::one_hot_fill<3>(tuples, 0, 1.0, 0.0), ember::ArgumentError);
    // The third batch.
    REQUIRE_THROWS_AS(ember::linalg::lu(a), ember::ShapeError);
    REQUIRE_THROWS_WITH(ember::linalg::det<1>(a), Contains("lu") && Contains("[2, 3]"));
    REQUIRE_THROWS_WITH(ember::linalg::outer_dim<3>(a, b, 1), Contains("outer_dim"));
    REQUIRE_THROWS_AS(
        ember::grid::affine_grid_2d(Tensor<B, 3>::zeros(Shape{2, 3, 3}), {2, 1, 4, 4}),
        ember::ShapeError);
    REQUIRE_THROWS_WITH(
        ember::grid::affine_grid_2d(Tensor<B, 3>::zeros(Shape{1, 2, 3}), {2, 1, 4, 4}),
        Contains("affine_grid_2d") && Contains("[1, 2, 3]") && Contains("[2, 1, 4, 4]"));
    REQUIRE_THROWS_AS(ember::grid_sample_2d(Tensor<B, 4>::zeros(Shape{2, 1, 3, 3}),
                                            Tensor<B, 4>::zeros(Shape{1, 2, 2, 2})),
                      ember::ShapeError);
    REQUIRE_THROWS_WITH(
        ember::grid_sample_2d(Tensor<B, 4>::zeros(Shape{2, 1, 3, 3}),
                              Tensor<B, 4>::zeros(Shape{2, 2, 2, 3})),
        Contains("grid_sample_2d") && Contains("[2, 2, 2, 3]") && Contains("[2, 1, 3, 3]"));
    REQUIRE_THROWS_AS(ember::signal::stft<3>(a, 8, 2), ember::ShapeError);
    REQUIRE_THROWS_WITH(ember::signal::stft<3>(a, 8, 2), Contains("stft") && Contains("[2, 3]"));
    REQUIRE_THROWS_AS(ember::signal::stft<3>(a, 2, 0), ember::ArgumentError);
    REQUIRE_THROWS_WITH(ember::signal::cfft(a, b, 1), Contains("cfft") && SHAPES);
    REQUIRE_THROWS_AS(ember::loss::cross_entropy_with_logits(a, b), ember::ShapeError);
    REQUIRE_THROWS_WITH(ember::loss::cross_entropy_with_logits(a, b),
                        Contains("cross_entropy_with_logits") && SHAPES);
    auto spec = Tensor<B, 3>::ones(Shape{2, 5, 4});
    REQUIRE_THROWS_AS(ember::signal::istft<2>(spec, spec, 6, 2), ember::ShapeError);
    REQUIRE_THROWS_WITH(ember::signal::istft<2>(spec, spec, 6, 2),
                        Contains("istft") && Contains("[2, 5, 4]"));
    REQUIRE_THROWS_AS(ember::signal::istft<2>(spec, spec, 8, 9), ember::ArgumentError);
    // A window that is zero where frames do not overlap: NOLA fails.
    REQUIRE_THROWS_AS(
        ember::signal::istft<2>(spec, spec, 8, 8, ember::signal::hann_window<B>(8, false), false),
        ember::ArgumentError);
    auto neg = Tensor<B, 1>::from_floats({0.5f, -0.1f}).template reshape<2>(Shape{1, 2});
    REQUIRE_THROWS_AS(ember::categorical(neg, 3), ember::ArgumentError);
    REQUIRE_THROWS_WITH(ember::categorical(neg, 3), Contains("categorical") && Contains("[1, 2]"));
    REQUIRE_THROWS_AS(ember::categorical(Tensor<B, 2>::zeros(Shape{2, 3}), 3),
                      ember::ArgumentError);
    REQUIRE_THROWS_AS(ember::pad(a, {3, 0}, ember::PadMode::Reflect), ember::ArgumentError);
    REQUIRE_THROWS_WITH(ember::pad(a, {3, 0}, ember::PadMode::Reflect),
                        Contains("pad") && Contains("[2, 3]"));
    REQUIRE_THROWS_AS(ember::pad(a, {1, 1, 1}, ember::PadMode::Constant), ember::ArgumentError);
#undef SHAPES
}

namespace {
using ember::test::In;
constexpr const char* kGradFile = "autodiff_composed";
/// The gradient cases this file checks (the last test asserts it covers the whole fixture).
std::set<std::string>& exercised() {
    static std::set<std::string> names;
    return names;
}
template <typename B, typename... Ins, typename F>
void grad_case(const char* name, F f, ember::test::GradOptions opt = {}) {
    exercised().insert(name);
    SECTION(name) {
        ember::test::check_gradients<B, Ins...>(kGradFile, name, f, opt);
    }
}
}  // namespace

TEMPLATE_LIST_TEST_CASE("composed: gradients", "[composed][autodiff]",
                        ember::test::AutodiffBackendsWithDispatch) {
    EMBER_SKIP_IF_UNAVAILABLE(TestType);
    using B = TestType;
    namespace la = ember::linalg;
    // Elementwise.
    grad_case<B, In<2>>("tan", [](auto x) { return ember::tan(x); });
    grad_case<B, In<2>>("sinh", [](auto x) { return ember::sinh(x); });
    grad_case<B, In<2>>("cosh", [](auto x) { return ember::cosh(x); });
    grad_case<B, In<2>>("asinh", [](auto x) { return ember::asinh(x); });
    grad_case<B, In<2>>("acosh", [](auto x) { return ember::acosh(x); });
    grad_case<B, In<2>>("atanh", [](auto x) { return ember::atanh(x); });
    grad_case<B, In<2>>("atan", [](auto x) { return ember::atan(x); });
    grad_case<B, In<2>, In<2>>("atan2", [](auto y, auto x) { return ember::atan2(y, x); });
    grad_case<B, In<2>>("asin", [](auto x) { return ember::asin(x); });
    grad_case<B, In<2>>("acos", [](auto x) { return ember::acos(x); });
    grad_case<B, In<2>, In<2>>("hypot", [](auto a, auto b) { return ember::hypot(a, b); });
    grad_case<B, In<2>, In<2>>("fmod", [](auto a, auto b) { return ember::fmod(a, b); });
    grad_case<B, In<3>>("square", [](auto x) { return ember::square(x); });
    grad_case<B, In<3>>("deg2rad", [](auto x) { return ember::deg2rad(x); });
    // Scans and reductions.
    grad_case<B, In<2>>("cumsum", [](auto x) { return ember::cumsum(x, 1); });
    grad_case<B, In<2>>("cumprod", [](auto x) { return ember::cumprod(x, 1); });
    grad_case<B, In<2>>("cummax", [](auto x) { return ember::cummax(x, 1); });
    grad_case<B, In<2>>("cummin", [](auto x) { return ember::cummin(x, 0); });
    grad_case<B, In<3>>("sum_dims", [](auto x) { return ember::sum_dims(x, {0, 2}); });
    grad_case<B, In<3>>("mean_dims", [](auto x) { return ember::mean_dims(x, {0, 2}); });
    grad_case<B, In<3>>("prod_dims", [](auto x) { return ember::prod_dims(x, {0, 2}); });
    grad_case<B, In<3>>("max_dims", [](auto x) { return ember::max_dims(x, {1, 2}); });
    grad_case<B, In<2>>("median", [](auto x) { return ember::median(x, 1); });
    // Shape ops and products.
    grad_case<B, In<2>, In<2>>("cross", [](auto a, auto b) { return ember::cross(a, b, 1); });
    grad_case<B, In<1>, In<1>>("dot", [](auto a, auto b) { return ember::dot(a, b); });
    grad_case<B, In<3>>("roll", [](auto x) { return ember::roll(x, {1, -2}, {0, 2}); });
    grad_case<B, In<3>>("take", [](auto x) {
        using BB = typename decltype(x)::BackendType;
        auto i = Tensor<BB, 1, Int>::from_ints({2, 0, 2, 1}).template reshape<2>(Shape{2, 2});
        return ember::take<4>(x, 1, i);
    });
    grad_case<B, In<3>>("slice_fill", [](auto x) {
        return ember::slice_fill(x, {Slice{0}, Slice{1, kEnd}}, 0.5);
    });
    grad_case<B, In<3>>("split", [](auto x) {
        auto p = ember::split(x, 3, 2);
        return decltype(x)::cat({p[1], p[0]}, 2);
    });
    // linalg.
    grad_case<B, In<2>>("vector_norm_l2", [](auto x) { return la::vector_norm(x, 2.0, 1); });
    grad_case<B, In<2>>("vector_norm_l1", [](auto x) { return la::l1_norm(x, 1); });
    grad_case<B, In<2>>("vector_norm_l3", [](auto x) { return la::lp_norm(x, 3.0, 0); });
    grad_case<B, In<2>>("vector_norm_linf", [](auto x) { return la::max_abs_norm(x, 1); });
    grad_case<B, In<2>>("vector_normalize", [](auto x) { return la::vector_normalize(x, 2.0, 1); });
    grad_case<B, In<2>, In<2>>("cosine_similarity",
                               [](auto a, auto b) { return la::cosine_similarity(a, b, 1); });
    grad_case<B, In<2>>("cov", [](auto x) { return ember::cov(x); });
    grad_case<B, In<2>, In<1>>("matvec", [](auto m, auto v) { return la::matvec(m, v); });
    grad_case<B, In<1>, In<1>>("outer", [](auto a, auto b) { return la::outer<2>(a, b); });
    grad_case<B, In<3>>("diag", [](auto x) { return la::diag<2>(x); });
    grad_case<B, In<2>>("trace", [](auto x) { return la::trace<1>(x); });
    grad_case<B, In<2>, In<2>>("outer_dim",
                               [](auto x, auto y) { return la::outer_dim<3>(x, y, 0); });
    grad_case<B, In<3>>("det", [](auto a) { return la::det<2>(a); });
    grad_case<B, In<2>>("lu_l", [](auto a) { return la::lu(a).l; });
    grad_case<B, In<2>>("lu_u", [](auto a) { return la::lu(a).u; });
    grad_case<B, In<3>>("affine_grid", [](auto t) {
        return ember::grid::affine_grid_2d(t, {2, 1, 3, 4});
    });
    grad_case<B, In<4>, In<4>>("grid_sample_zeros",
                               [](auto x, auto g) { return ember::grid_sample_2d(x, g); });
    grad_case<B, In<4>, In<4>>("grid_sample_reflection", [](auto x, auto g) {
        return ember::grid_sample_2d(
            x, g, {ember::GridSampleMode::Bilinear, ember::GridSamplePadding::Reflection, true});
    });
    grad_case<B, In<2>>("stft", [](auto x) {
        using BB = typename decltype(x)::BackendType;
        return ember::signal::stft<3>(x, 4, 2, ember::signal::hann_window<BB>(4)).first;
    });
    grad_case<B, In<2>, In<2>>("cfft_re",
                               [](auto r, auto i) { return ember::signal::cfft(r, i, 1).first; });
    grad_case<B, In<2>, In<2>>("cfft_im",
                               [](auto r, auto i) { return ember::signal::cfft(r, i, 1).second; });
    grad_case<B, In<2>, In<2>>("cross_entropy_with_logits", [](auto x, auto t) {
        return ember::loss::cross_entropy_with_logits(x, t);
    });
    grad_case<B, In<3>, In<3>>("istft", [](auto r, auto i) {
        using BB = typename decltype(r)::BackendType;
        return ember::signal::istft<2>(r, i, 4, 2, ember::signal::hann_window<BB>(4));
    });
    grad_case<B, In<3>>("pad_reflect", [](auto x) {
        return ember::pad(x, {2, 1, 1, 1}, ember::PadMode::Reflect);
    });
    grad_case<B, In<3>>("pad_replicate", [](auto x) {
        return ember::pad(x, {1, 2, 0, 1}, ember::PadMode::Replicate);
    });
    // Index and signal ops.
    grad_case<B, In<3>>("unfold", [](auto x) { return ember::unfold<4>(x, 2, 2, 1); });
    grad_case<B, In<3>>("gather_nd", [](auto x) {
        using BB = typename decltype(x)::BackendType;
        auto i = Tensor<BB, 1, Int>::from_ints({1, 2, 0, 0, 1, 2}).template reshape<2>(Shape{3, 2});
        return ember::gather_nd<2>(x, i);
    });
    grad_case<B, In<3>, In<2>>("scatter_nd", [](auto x, auto v) {
        using BB = typename decltype(x)::BackendType;
        auto i = Tensor<BB, 1, Int>::from_ints({1, 2, 0, 0}).template reshape<2>(Shape{2, 2});
        return ember::scatter_nd(x, i, v);
    });
    grad_case<B, In<2>>("rfft_re", [](auto x) { return ember::signal::rfft(x, 1).first; });
    grad_case<B, In<2>>("rfft_im", [](auto x) { return ember::signal::rfft(x, 0).second; });
    grad_case<B, In<2>, In<2>>("irfft",
                               [](auto re, auto im) { return ember::signal::irfft(re, im, 1, 7); });
    SECTION("every case of autodiff_composed.json is checked") {
        for (const auto& name : ember::test::fixture_cases(kGradFile)) {
            INFO(name);
            CHECK(exercised().count(name) == 1);
        }
    }
}

}  // namespace test_tensor_composed
