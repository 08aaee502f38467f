#!/usr/bin/env python3
"""Derives the coefficients of ember's f32 erf (backends/cpu/elementwise_fns.hpp, fast_erf).

erf(x) = x * P(x^2) / Q(x^2) on [-4, 4] (|x| > 4 is clamped: erf(4) rounds to 1 in f32), with P of
degree 6 and Q of degree 5, Q(0) = 1. The fit minimises the relative error of erf(x)/x: an
iterated linearised least-squares rational fit (Sanathanan-Koerner), then Lawson's reweighting
toward the minimax solution. It then checks the f32 evaluation (Horner with fused multiply-adds,
as the C++ compiles) against math.erf on a dense grid.

    /usr/bin/python3 tools/approx/fit_erf.py
"""
import math

import numpy as np

C = 4.0


def fit(x, f, dp, dq, iters=40):
    u = (x / C) ** 2  # the fit runs on [0, 1] for conditioning
    q_prev, lw, w = np.ones_like(u), np.ones_like(u), 1.0 / f
    for it in range(iters):
        a = np.hstack([np.vstack([u**k for k in range(dp + 1)]).T,
                       -(f[:, None] * np.vstack([u**k for k in range(1, dq + 1)]).T)])
        sc = (w * np.sqrt(lw) / q_prev)[:, None]
        sol, *_ = np.linalg.lstsq(a * sc, f * sc[:, 0], rcond=None)
        p, q = sol[:dp + 1], np.concatenate([[1.0], sol[dp + 1:]])
        big_q = np.polyval(q[::-1], u)
        err = (np.polyval(p[::-1], u) / big_q - f) / f
        q_prev = big_q
        if it >= 5:
            lw = lw * np.abs(err)
            lw /= lw.sum()
            lw = np.maximum(lw, lw.max() * 1e-9)
    # Back to powers of t = x^2, rounded to f32 as the C++ holds them.
    return ([np.float32(p[k] / C ** (2 * k)) for k in range(dp + 1)],
            [np.float32(q[k] / C ** (2 * k)) for k in range(dq + 1)], np.abs(err).max())


def eval_f32(xs, pt, qt):
    """x * P(t) / Q(t) in f32 with one rounding per multiply-add (as an FMA)."""
    f32, f64 = np.float32, np.float64
    x = np.clip(xs, -C, C).astype(f32)
    t = (x.astype(f64) * x).astype(f32)
    p = np.full_like(t, pt[-1])
    for c in reversed(pt[:-1]):
        p = (p.astype(f64) * t + f64(c)).astype(f32)
    q = np.full_like(t, qt[-1])
    for c in reversed(qt[:-1]):
        q = (q.astype(f64) * t + f64(c)).astype(f32)
    y = ((x.astype(f64) * p).astype(f32).astype(f64) / q).astype(f32)
    return np.clip(y, -1, 1)


def main():
    x = np.concatenate([np.linspace(1e-4, C, 20000), C * (1 - np.cos(np.linspace(0, np.pi / 2, 20000)))])
    x = x[x > 1e-6]
    f = np.array([math.erf(v) / v for v in x])
    pt, qt, err = fit(x, f, 6, 5)
    print("P:", ", ".join("%.9ef" % v for v in pt))
    print("Q:", ", ".join("%.9ef" % v for v in qt))
    xs = np.concatenate([np.logspace(-8, 0.7, 200000), np.linspace(0, 6, 200000)]).astype(np.float32)
    ref = np.array([math.erf(float(v)) for v in xs])
    y = eval_f32(xs, pt, qt)
    print("fit's relative error (double): %.3g; f32 evaluation: max relative error %.3g, "
          "max absolute error %.3g" % (err, (np.abs(y - ref) / np.maximum(np.abs(ref), 1e-30)).max(),
                                       np.abs(y - ref).max()))


if __name__ == "__main__":
    main()
