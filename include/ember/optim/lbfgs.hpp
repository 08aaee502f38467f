#pragma once
// L-BFGS (torch.optim.LBFGS): a quasi-Newton method that keeps the last `history_size` pairs of
// parameter and gradient changes (s, y) and turns the gradient into a search direction with the
// two-loop recursion; the step length is the learning rate, or comes from a line search
// satisfying the strong Wolfe conditions (torch's line_search_fn="strong_wolfe": bracketing, then
// zoom by cubic interpolation). Unlike the other optimizers it re-evaluates the model itself:
// `step` takes a closure computing the loss and may call it several times.
//
// Every trainable float parameter is one block of a flat vector, in visit order (torch's order of
// a module's parameters). The vector algebra (two-loop recursion, line search, dot products)
// runs on the host in double precision, as a handful of passes per evaluation over the
// parameters: each evaluation already reads the loss back, and L-BFGS serves models whose
// evaluations cost far more than that (full-batch fits, small networks, style transfer).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <string_view>
#include <vector>

#include "../autodiff/autodiff.hpp"
#include "../module/config.hpp"
#include "../module/module.hpp"
#include "gradients_params.hpp"

namespace ember::optim {

/// How L-BFGS picks each step's length.
enum class LbfgsLineSearch : int {
    None,        ///< the learning rate (the first step of a run: lr·min(1, 1/‖g‖₁))
    StrongWolfe  ///< a strong-Wolfe line search from that length (c₁ = 1e-4, c₂ = 0.9, 25 tries)
};

namespace detail {

/// The minimiser of the cubic through (x1, f1) and (x2, f2) with slopes g1 and g2, clamped to
/// `bounds` (default: between x1 and x2); the middle of the bounds where the cubic has none.
inline double cubic_interpolate(double x1, double f1, double g1, double x2, double f2, double g2,
                                std::optional<std::pair<double, double>> bounds = std::nullopt) {
    const auto [lo, hi] = bounds ? *bounds : (x1 <= x2 ? std::pair{x1, x2} : std::pair{x2, x1});
    const double d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2);
    const double d2_square = d1 * d1 - g1 * g2;
    if (d2_square >= 0) {
        const double d2 = std::sqrt(d2_square);
        const double min_pos = x1 <= x2 ? x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
                                        : x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2));
        return std::min(std::max(min_pos, lo), hi);
    }
    return (lo + hi) / 2;
}

inline double dot(const std::vector<double>& a, const std::vector<double>& b) {
    double s = 0;
    for (std::size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
    return s;
}

inline double max_abs(const std::vector<double>& a) {
    double m = 0;
    for (double v : a) m = std::max(m, std::abs(v));
    return m;
}

/// A line search result: the loss and gradient at the chosen step t, and the evaluations spent.
struct WolfeResult {
    double loss;               ///< f(x + t·d)
    std::vector<double> grad;  ///< ∇f(x + t·d)
    double t;                  ///< the step length
    std::size_t evaluations;   ///< closure calls
};

/// The strong-Wolfe line search of torch.optim.LBFGS along `d` from the point with loss `f`,
/// gradient `g` and directional derivative `gtd`, starting at step `t`. `eval(t)` returns the
/// loss and gradient at x + t·d.
template <typename Eval>
WolfeResult strong_wolfe(Eval&& eval, double t, const std::vector<double>& d, double f,
                         const std::vector<double>& g, double gtd, double tolerance_change,
                         double c1 = 1e-4, double c2 = 0.9, std::size_t max_ls = 25) {
    const double d_norm = max_abs(d);
    auto [f_new, g_new] = eval(t);
    std::size_t evals = 1;
    double gtd_new = dot(g_new, d);
    double t_prev = 0, f_prev = f, gtd_prev = gtd;
    std::vector<double> g_prev = g;
    bool done = false;
    std::size_t ls_iter = 0;
    // The bracket: one point when the first phase already satisfies the conditions.
    std::vector<double> bt, bf, bgtd;
    std::vector<std::vector<double>> bg;
    auto bracket = [&](std::vector<double> ts, std::vector<double> fs,
                       std::vector<std::vector<double>> gs, std::vector<double> gtds) {
        bt = std::move(ts);
        bf = std::move(fs);
        bg = std::move(gs);
        bgtd = std::move(gtds);
    };
    while (ls_iter < max_ls) {
        if (f_new > f + c1 * t * gtd || (ls_iter > 1 && f_new >= f_prev)) {
            bracket({t_prev, t}, {f_prev, f_new}, {g_prev, g_new}, {gtd_prev, gtd_new});
            break;
        }
        if (std::abs(gtd_new) <= -c2 * gtd) {
            bracket({t}, {f_new}, {g_new}, {gtd_new});
            done = true;
            break;
        }
        if (gtd_new >= 0) {
            bracket({t_prev, t}, {f_prev, f_new}, {g_prev, g_new}, {gtd_prev, gtd_new});
            break;
        }
        // Extrapolate: a cubic step between 1.01·t and 10·t.
        const double min_step = t + 0.01 * (t - t_prev), max_step = t * 10;
        const double tmp = t;
        t = cubic_interpolate(t_prev, f_prev, gtd_prev, t, f_new, gtd_new,
                              std::pair{min_step, max_step});
        t_prev = tmp, f_prev = f_new, g_prev = g_new, gtd_prev = gtd_new;
        std::tie(f_new, g_new) = eval(t);
        ++evals;
        gtd_new = dot(g_new, d);
        ++ls_iter;
    }
    if (ls_iter == max_ls) {
        bracket({0, t}, {f, f_new}, {g, g_new}, {gtd, gtd_new});
    }
    // Zoom: shrink the bracket by cubic interpolation until the conditions hold.
    bool insufficient = false;
    std::size_t low = 0, high = 1;
    if (bt.size() == 2 && bf[0] > bf[1]) low = 1, high = 0;
    while (!done && ls_iter < max_ls) {
        if (std::abs(bt[1] - bt[0]) * d_norm < tolerance_change) break;
        t = cubic_interpolate(bt[0], bf[0], bgtd[0], bt[1], bf[1], bgtd[1]);
        const double bmax = std::max(bt[0], bt[1]), bmin = std::min(bt[0], bt[1]);
        const double eps = 0.1 * (bmax - bmin);
        if (std::min(bmax - t, t - bmin) < eps) {
            // Too close to an end: move it inside, unless the last step made progress.
            if (insufficient || t >= bmax || t <= bmin) {
                t = std::abs(t - bmax) < std::abs(t - bmin) ? bmax - eps : bmin + eps;
                insufficient = false;
            } else {
                insufficient = true;
            }
        } else {
            insufficient = false;
        }
        std::tie(f_new, g_new) = eval(t);
        ++evals;
        gtd_new = dot(g_new, d);
        ++ls_iter;
        if (f_new > f + c1 * t * gtd || f_new >= bf[low]) {
            bt[high] = t, bf[high] = f_new, bg[high] = g_new, bgtd[high] = gtd_new;
            if (bf[0] <= bf[1])
                low = 0, high = 1;
            else
                low = 1, high = 0;
        } else {
            if (std::abs(gtd_new) <= -c2 * gtd)
                done = true;
            else if (gtd_new * (bt[high] - bt[low]) >= 0) {
                bt[high] = bt[low], bf[high] = bf[low], bg[high] = bg[low], bgtd[high] = bgtd[low];
            }
            bt[low] = t, bf[low] = f_new, bg[low] = g_new, bgtd[low] = gtd_new;
        }
    }
    return {bf[low], std::move(bg[low]), bt[low], evals};
}

}  // namespace detail

template <module::Module M>
class Lbfgs;

/// Configuration of L-BFGS (torch.optim.LBFGS's arguments and defaults).
struct LbfgsConfig {
    double lr = 1.0;                 ///< the step length (the line search's first guess)
    std::size_t max_iter = 20;       ///< iterations per step()
    std::size_t max_eval = 0;        ///< closure calls per step(); 0: max_iter·5/4
    double tolerance_grad = 1e-7;    ///< stop when every |gradient| is at most this
    double tolerance_change = 1e-9;  ///< stop when the loss or the step changes less
    std::size_t history_size = 100;  ///< (s, y) pairs kept
    LbfgsLineSearch line_search = LbfgsLineSearch::None;  ///< how steps are sized
    EMBER_CONFIG(LbfgsConfig, lr, max_iter, max_eval, tolerance_grad, tolerance_change,
                 history_size, line_search)

    /// The optimizer for modules of type M. Throws ArgumentError for a non-positive or
    /// non-finite lr, max_iter or history_size of 0, or negative tolerances.
    template <module::Module M>
    Lbfgs<M> init() const {
        EMBER_CHECK(lr > 0 && std::isfinite(lr), Argument,
                    "LbfgsConfig::init: lr must be positive and finite, got ", lr);
        EMBER_CHECK(max_iter >= 1 && history_size >= 1, Argument,
                    "LbfgsConfig::init: max_iter and history_size must be at least 1, got ",
                    max_iter, " and ", history_size);
        EMBER_CHECK(tolerance_grad >= 0 && tolerance_change >= 0, Argument,
                    "LbfgsConfig::init: tolerances must be non-negative, got ", tolerance_grad,
                    " and ", tolerance_change);
        LbfgsConfig c = *this;
        if (c.max_eval == 0) c.max_eval = max_iter * 5 / 4;
        return Lbfgs<M>(c);
    }
};

/// L-BFGS over the trainable float parameters of modules of type `M` (on an autodiff backend),
/// as torch.optim.LBFGS: `step(module, closure)` runs up to max_iter iterations, calling
/// `closure(module)` — the loss of the module as it is given, a one-element tensor — and
/// differentiating it as often as it needs. The curvature history carries over between steps.
template <module::Module M>
class Lbfgs {
  public:
    /// The module's backend (an autodiff one).
    using B = module::BackendOf<M>;
    /// The loss of a module.
    using Closure = std::function<Tensor<B, 1>(const M&)>;

    /// An optimizer with `config` (use LbfgsConfig::init, which checks it).
    explicit Lbfgs(LbfgsConfig config) : config_(config) {}

    /// Up to max_iter L-BFGS iterations from `module`; returns the module at the last point.
    /// loss() is then the loss closure gave at `module` (torch's step() return value).
    /// ShapeError when the closure's loss is not one element.
    M step(M module, const Closure& closure) {
        const std::vector<double> x0 = flatten(module);
        auto evaluate = [&](const std::vector<double>& x) {
            M m = unflatten(module, x);
            Tensor<B, 1> loss = closure(m);
            EMBER_CHECK(loss.shape().num_elements() == 1, Shape,
                        "Lbfgs step: the closure's loss has shape ", loss.shape().to_string(),
                        "; it must have one element");
            const double value = double(loss.inner().into_scalar());
            auto grads = GradientsParams::from_grads(loss.backward(), m);
            return std::pair{value, flat_grad(m, grads)};
        };
        auto [loss, g] = evaluate(x0);
        loss_ = loss;
        std::size_t evals = 1;
        func_evals_ += 1;
        if (detail::max_abs(g) <= config_.tolerance_grad) return module;
        std::vector<double> x = x0;
        for (std::size_t it = 1; it <= config_.max_iter; ++it) {
            ++n_iter_;
            if (n_iter_ == 1) {
                d_ = negate(g);
                dirs_.clear(), steps_.clear(), rho_.clear();
                h_diag_ = 1;
            } else {
                direction(g);
            }
            prev_grad_ = g;
            const double prev_loss = loss;
            if (n_iter_ == 1) {
                double l1 = 0;
                for (double v : g) l1 += std::abs(v);
                t_ = std::min(1.0, 1.0 / l1) * config_.lr;
            } else {
                t_ = config_.lr;
            }
            const double gtd = detail::dot(g, d_);
            if (gtd > -config_.tolerance_change) break;
            std::size_t ls_evals = 0;
            bool optimal = false;
            if (config_.line_search == LbfgsLineSearch::StrongWolfe) {
                auto eval_at = [&](double t) { return evaluate(moved(x, t, d_)); };
                auto r =
                    detail::strong_wolfe(eval_at, t_, d_, loss, g, gtd, config_.tolerance_change);
                loss = r.loss, g = std::move(r.grad), t_ = r.t, ls_evals = r.evaluations;
                x = moved(x, t_, d_);
                optimal = detail::max_abs(g) <= config_.tolerance_grad;
            } else {
                x = moved(x, t_, d_);
                if (it != config_.max_iter) {
                    std::tie(loss, g) = evaluate(x);
                    optimal = detail::max_abs(g) <= config_.tolerance_grad;
                    ls_evals = 1;
                }
            }
            evals += ls_evals;
            func_evals_ += ls_evals;
            if (it == config_.max_iter || evals >= config_.max_eval || optimal) break;
            if (detail::max_abs(d_) * std::abs(t_) <= config_.tolerance_change) break;
            if (std::abs(loss - prev_loss) < config_.tolerance_change) break;
        }
        return unflatten(module, x);
    }

    /// The loss the closure gave at the module the last step() started from.
    double loss() const { return loss_; }
    /// Closure calls since the optimizer was made.
    std::size_t func_evals() const { return func_evals_; }
    /// Iterations since the optimizer was made.
    std::size_t iterations() const { return n_iter_; }
    /// The configuration (max_eval filled in).
    const LbfgsConfig& config() const { return config_; }

  private:
    using IB = InnerBackend<B>;

    static std::vector<double> negate(const std::vector<double>& v) {
        std::vector<double> out(v.size());
        for (std::size_t i = 0; i < v.size(); ++i) out[i] = -v[i];
        return out;
    }
    static std::vector<double> moved(const std::vector<double>& x, double t,
                                     const std::vector<double>& d) {
        std::vector<double> out(x.size());
        for (std::size_t i = 0; i < x.size(); ++i) out[i] = x[i] + t * d[i];
        return out;
    }

    // Updates the history with the last step and sets d_ by the two-loop recursion.
    void direction(const std::vector<double>& g) {
        const std::size_t n = g.size();
        std::vector<double> y(n), s(n);
        for (std::size_t i = 0; i < n; ++i) y[i] = g[i] - prev_grad_[i], s[i] = d_[i] * t_;
        const double ys = detail::dot(y, s);
        // Only pairs of positive curvature keep the inverse Hessian estimate positive definite.
        if (ys > 1e-10) {
            if (dirs_.size() == config_.history_size) {
                dirs_.pop_front(), steps_.pop_front(), rho_.pop_front();
            }
            h_diag_ = ys / detail::dot(y, y);
            dirs_.push_back(std::move(y)), steps_.push_back(std::move(s)), rho_.push_back(1 / ys);
        }
        std::vector<double> q = negate(g), alpha(dirs_.size());
        for (std::size_t k = dirs_.size(); k-- > 0;) {
            alpha[k] = detail::dot(steps_[k], q) * rho_[k];
            for (std::size_t i = 0; i < n; ++i) q[i] -= alpha[k] * dirs_[k][i];
        }
        for (double& v : q) v *= h_diag_;
        for (std::size_t k = 0; k < dirs_.size(); ++k) {
            const double beta = detail::dot(dirs_[k], q) * rho_[k];
            for (std::size_t i = 0; i < n; ++i) q[i] += (alpha[k] - beta) * steps_[k][i];
        }
        d_ = std::move(q);
    }

    template <typename P>
    static constexpr bool trains = detail::ParamTraits<P>::is_float;

    // The trainable parameters' values, concatenated in visit order.
    static std::vector<double> flatten(const M& m) {
        std::vector<double> out;
        m.visit([&](std::string_view, const auto& p) {
            using P = module::detail::Bare<decltype(p)>;
            if constexpr (trains<P>) {
                if (!p.is_require_grad()) return;
                const auto v = p.val().inner().to_data().template to_vec<double>();
                out.insert(out.end(), v.begin(), v.end());
            }
        });
        return out;
    }
    // The gradients in the same order; a parameter without one contributes zeros.
    static std::vector<double> flat_grad(const M& m, const GradientsParams& grads) {
        std::vector<double> out;
        m.visit([&](std::string_view, const auto& p) {
            using P = module::detail::Bare<decltype(p)>;
            if constexpr (trains<P>) {
                if (!p.is_require_grad()) return;
                constexpr std::size_t D = detail::ParamTraits<P>::rank;
                if (auto g = grads.template get<IB, D>(p.id())) {
                    const auto v = g->to_data().template to_vec<double>();
                    out.insert(out.end(), v.begin(), v.end());
                } else {
                    out.resize(out.size() + p.shape().num_elements(), 0.0);
                }
            }
        });
        return out;
    }
    // `m` with its trainable parameters set from `x` (each in its own dtype and device).
    static M unflatten(const M& m, const std::vector<double>& x) {
        std::size_t at = 0;
        return module::map(m, [&](std::string_view, const auto& p) {
            using P = module::detail::Bare<decltype(p)>;
            if constexpr (!trains<P>) {
                return p;
            } else {
                if (!p.is_require_grad()) return p;
                constexpr std::size_t D = detail::ParamTraits<P>::rank;
                const auto inner = p.val().inner();
                const Shape shape = inner.shape();
                const std::size_t n = shape.num_elements();
                std::vector<double> v(x.begin() + std::ptrdiff_t(at),
                                      x.begin() + std::ptrdiff_t(at + n));
                at += n;
                auto data = TensorData(v, shape).convert(inner.dtype());
                return p.with_value(P::Value::from_inner(
                    Tensor<IB, D>::from_data(std::move(data), inner.device())));
            }
        });
    }

    LbfgsConfig config_;
    std::vector<double> d_, prev_grad_;
    double t_ = 0, h_diag_ = 1, loss_ = 0;
    std::deque<std::vector<double>> dirs_, steps_;
    std::deque<double> rho_;
    std::size_t n_iter_ = 0, func_evals_ = 0;
};

}  // namespace ember::optim
