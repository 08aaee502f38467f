// bench_scale_gpt_ops: the ops of one training step of the gpt example's model (GPT-2 small's
// shape: 12 layers, d_model 768, 12 heads, vocabulary 256; AdamW; dropout 0, as bench_scale
// trains it) at --batch 4 sequences of --seq 256 tokens, timed one class at a time on ember's
// CPU backend (issue 37), and the whole step for reference. It says which ops keep the step from
// scaling with --threads: run it at 1 and at N threads and compare each class's wall time.
//
//   bench_scale_gpt_ops [--threads 1] [--batch 4] [--seq 256] [--min-time 0.3]
//                       [--only matmul_fwd,ln_bwd,...] [--shape SUBSTRING]
//
// Classes, each as the model runs it (the backend's kernels where Autodiff calls exactly one,
// else Autodiff<Cpu> itself): matmul_fwd (the Linear layers' products with their bias added in
// the GEMM: the attention's q, k, v projections as one 768→2304 product where the CPU's packed
// attention kernel runs, else three 768→768, its output projection 768→768, the MLP's 768→3072
// and 3072→768, and the tied embedding's scores 768→256), matmul_bwd_data (g·Wᵀ) and
// matmul_bwd_weight (Xᵀ·g) of each, bias_grad (the bias gradients' sums over the rows),
// qkv_cat_fwd / qkv_cat_bwd (the packed projection's weights put side by side, the gradient
// split back), attn_fwd / attn_bwd (from the projections to the merged heads: the packed fused
// kernel, or with EMBER_CPU_ATTENTION=0 the heads split, module::attention's composed form with
// the causal mask and the heads merged), ln_fwd / ln_bwd (module::add_layer_norm between the
// blocks and the two plain LayerNorms), gelu_fwd / gelu_bwd, grad_add (the additions Autodiff
// makes where a tensor's gradient arrives from two uses: the attention input's separate
// projections, the residual stream; the count is approximate), xent_fwd / xent_bwd (the
// cross-entropy on the [N·S, 256] scores), embed_fwd / embed_bwd (token and position tables,
// the two added), adamw (the optimizer's step over the 86 M parameters, the model's real
// gradients), and step (forward, loss, backward, AdamW, as bench_scale times it).
// An Autodiff class's backward is (forward + backward of Σ y·g) − forward − the same for an
// identity op (Σ x·g on a leaf), so that the seed multiplication and the sum are not counted.
// Left out of the classes (so Σ classes < step by their cost): Autodiff's graph bookkeeping
// outside the timed ops, the final residual addition and the reshapes between ops (views),
// the gradient of the transposed embedding added to the lookup's, and freeing the graph.
//
// One JSON line per row, {"framework": "ember", "op", "shape", "count" (times a step runs it),
// "cpu_ms" (median process CPU time of one call: the machine may be shared), "wall_ms" (the
// fastest call's wall time), "threads"}, then one line per class with the totals Σ count·ms
// (and the sum over the classes as op "sum"), then the step's line. Benchmarks measure, they
// never assert.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <ember/ember.hpp>
#include <ember/nn.hpp>
#include <ember/optim.hpp>

#include "../examples/gpt/data.hpp"
#include "../examples/gpt/model.hpp"
#include "bench_ops_common.hpp"

namespace {

using C = ember::CpuBackend<float>;
using AD = ember::Autodiff<ember::Cpu>;
using FT = C::FT;
template <std::size_t D>
using T = ember::Tensor<AD, D>;

using bench_ops::Opts;
using bench_ops::Time;
using bench_ops::timed;

FT randn(const ember::Shape& s, double sd = 1.0) {
    return C::float_random(s, ember::Distribution::Normal(0, sd), {});
}

template <std::size_t D>
T<D> tracked(const FT& t) {
    return T<D>::from_primitive(AD::from_inner(t)).require_grad();
}
template <std::size_t D>
T<D> constant(const FT& t) {
    return T<D>::from_primitive(AD::from_inner(t));
}

}  // namespace

int main(int argc, char** argv) {
    Opts o;
    o.batch = 4;
    o.seq = 256;
    if (!bench_ops::parse(argc, argv, "bench_scale_gpt_ops", true, o)) return 2;
    ember::cpu::set_num_threads(o.threads);
    AD::seed(42);
    const std::size_t nb = o.batch, s = o.seq, rows = nb * s;
    const std::size_t d = 768, heads = 12, ff = 4 * d, vocab = 256, layers = 12, context = 1024;
    {
        // One product first, whatever --only asks for: a process's first GEMMs ran the composed
        // attention's products at half the speed they have once a step has run (OpenBLAS's
        // buffers, the allocator's cache), which --only attn_fwd alone would have timed.
        const FT a = randn({rows, d}), w = randn({d, d});
        for (int i = 0; i < 3; ++i) (void)C::float_matmul(a, w);
    }
    bench_ops::Report report;
    report.threads = o.threads;
    auto want = [&](const char* op) { return o.only.empty() || o.only.count(op) > 0; };
    auto emit = [&](const char* op, const std::string& shape, std::size_t count, Time t) {
        report.emit(op, shape, count, t);
    };
    auto shown = [&](const std::string& shape) { return shape.find(o.shape) != std::string::npos; };
    const std::string act = std::to_string(nb) + "x" + std::to_string(s) + "x";

    // The cost of seeding a backward pass with g (Σ y·g, its backward) on a tracked leaf: what
    // an Autodiff class's backward row subtracts besides the forward.
    std::map<std::size_t, Time> probes;
    auto probe = [&](const ember::Shape& shape) {
        const std::size_t n = shape.num_elements();
        if (!probes.count(n)) {
            const auto x = tracked<1>(randn({n}));
            const auto g = constant<1>(randn({n}));
            probes[n] = timed(o, [&] { (void)(x * g).sum().backward(); });
        }
        return probes[n];
    };

    // The Linear layers: {in, out, count per step, bias}. The scores against the tied token
    // embedding are a product with the table's transposed view and no bias.
    struct Lin {
        std::size_t in, out, count;
        bool bias;
    };
    // With the CPU's packed attention kernel, MultiHeadAttention projects q, k and v in one
    // product (their weights side by side); without it (EMBER_CPU_ATTENTION=0), one by one.
    const bool packed =
        ember::AttentionKernel<C>::supports_packed(randn({nb, s, d}), heads, d / heads);
    const std::vector<Lin> lins = {
        packed ? Lin{d, 3 * d, layers, true} : Lin{d, d, 3 * layers, true},
        {d, d, layers, true},
        {d, ff, layers, true},
        {ff, d, layers, true},
        {d, vocab, 1, false}};
    for (const Lin& l : lins) {
        const std::string shape = std::to_string(rows) + "x" + std::to_string(l.in) + "_" +
                                  std::to_string(l.in) + "x" + std::to_string(l.out) +
                                  (l.bias ? "" : "_tied");
        if (!shown(shape)) continue;
        const FT x = randn({rows, l.in});
        const FT g = randn({rows, l.out});
        // The weight as the model holds it: [in, out], or the embedding table [out, in] seen
        // transposed.
        const FT table = randn({l.out, l.in}, 0.02);
        const FT w = l.bias ? randn({l.in, l.out}, 0.02) : C::float_swap_dims(table, 0, 1);
        const FT b = randn({l.out}, 0.02);
        if (want("matmul_fwd"))
            emit("matmul_fwd", shape, l.count, timed(o, [&] {
                     if (!l.bias || !C::fused_matmul_epilogue(x, w, b, {}))
                         (void)C::float_matmul(x, w);
                 }));
        if (want("matmul_bwd_data"))
            emit("matmul_bwd_data", shape, l.count,
                 timed(o, [&] { (void)C::float_matmul(g, C::float_swap_dims(w, 0, 1)); }));
        if (want("matmul_bwd_weight"))
            emit("matmul_bwd_weight", shape, l.count,
                 timed(o, [&] { (void)C::float_matmul(C::float_swap_dims(x, 0, 1), g); }));
        if (l.bias && want("bias_grad"))
            emit("bias_grad", std::to_string(rows) + "x" + std::to_string(l.out), l.count,
                 timed(o, [&] { (void)C::float_reduce_dim(ember::ReduceOp::Sum, g, 0); }));
    }

    const ember::Shape act_d{nb, s, d};
    if ((want("attn_fwd") || want("attn_bwd")) && shown(act + std::to_string(d))) {
        // From the projections' outputs to the merged heads the output projection reads, as
        // MultiHeadAttention::forward runs it: the packed kernel on the [N, S, 3·d] product, or
        // (EMBER_CPU_ATTENTION=0) the heads split from three projections, module::attention
        // (the composed form: products, mask, softmax) and the heads merged back.
        const std::string shape = act + std::to_string(heads) + "x" + std::to_string(d / heads) +
                                  (packed ? "_packed" : "");
        const auto q = tracked<3>(randn(act_d)), k = tracked<3>(randn(act_d)),
                   v = tracked<3>(randn(act_d));
        const auto qkv = tracked<3>(randn({nb, s, 3 * d}));
        const auto g = constant<3>(randn(act_d));
        const std::size_t e = d / heads;
        auto split = [&](const T<3>& x) {
            return x.reshape<4>(std::array<std::size_t, 4>{nb, s, heads, e}).swap_dims(1, 2);
        };
        auto attend = [&] {
            ember::AttentionOptions ao;
            ao.causal = true;
            ao.scale = 1.0 / std::sqrt(double(e));
            if (packed) return ember::module::attention_packed(qkv, heads, ao);
            auto ctx = ember::module::attention(split(q), split(k), split(v), ao);
            return ctx.swap_dims(1, 2).reshape<3>(std::array<std::size_t, 3>{nb, s, d});
        };
        const Time fwd = timed(o, [&] { (void)attend(); });
        if (want("attn_fwd")) emit("attn_fwd", shape, layers, fwd);
        if (want("attn_bwd")) {
            const Time both = timed(o, [&] { (void)(attend() * g).sum().backward(); });
            emit("attn_bwd", shape, layers, both - fwd - probe(act_d));
        }
    }

    if (packed && (want("qkv_cat_fwd") || want("qkv_cat_bwd")) &&
        shown(std::to_string(d) + "x" + std::to_string(3 * d))) {
        // The packed projection's weight and bias: the three Linear layers' side by side, put
        // together at every forward (the gradient split back into the three).
        const std::string shape = std::to_string(d) + "x" + std::to_string(3 * d);
        std::vector<T<2>> w;
        std::vector<T<1>> b;
        for (int i = 0; i < 3; ++i) {
            w.push_back(tracked<2>(randn({d, d}, 0.02)));
            b.push_back(tracked<1>(randn({d}, 0.02)));
        }
        const auto gw = constant<2>(randn({d, 3 * d}));
        const auto gb = constant<1>(randn({3 * d}));
        const Time fwd = timed(o, [&] {
            (void)T<2>::cat(w, 1);
            (void)T<1>::cat(b, 0);
        });
        if (want("qkv_cat_fwd")) emit("qkv_cat_fwd", shape, layers, fwd);
        if (want("qkv_cat_bwd")) {
            const Time both = timed(o, [&] {
                (void)((T<2>::cat(w, 1) * gw).sum() + (T<1>::cat(b, 0) * gb).sum()).backward();
            });
            emit("qkv_cat_bwd", shape, layers, both - fwd - probe({d, 3 * d}) - probe({3 * d}));
        }
    }

    if ((want("ln_fwd") || want("ln_bwd")) && shown(act + std::to_string(d))) {
        // add_layer_norm between the blocks (2 a layer but the first block's norm and the last
        // residual addition), and the two plain ones (before the first block, the final norm).
        const auto x = tracked<3>(randn(act_d)), r = tracked<3>(randn(act_d));
        const auto gamma = tracked<1>(randn({d})), beta = tracked<1>(randn({d}));
        const auto g = constant<3>(randn(act_d)), g2 = constant<3>(randn(act_d));
        auto add_norm = [&] {
            return ember::module::add_layer_norm(x, r, std::optional(gamma), std::optional(beta),
                                                 1e-5);
        };
        auto norm = [&] {
            return ember::module::layer_norm(x, std::optional(gamma), std::optional(beta), 1e-5);
        };
        const std::string shape = act + std::to_string(d);
        const Time add_fwd = timed(o, [&] { (void)add_norm(); });
        const Time plain_fwd = timed(o, [&] { (void)norm(); });
        if (want("ln_fwd")) {
            emit("ln_fwd", shape + "_add", 2 * layers - 1, add_fwd);
            emit("ln_fwd", shape, 2, plain_fwd);
        }
        if (want("ln_bwd")) {
            // The sum feeds the next block's residual too: both outputs get a gradient.
            const Time add_both = timed(o, [&] {
                auto a = add_norm();
                (void)((a.sum * g2).sum() + (a.normed * g).sum()).backward();
            });
            const Time plain_both = timed(o, [&] { (void)(norm() * g).sum().backward(); });
            emit("ln_bwd", shape + "_add", 2 * layers - 1,
                 add_both - add_fwd - probe(act_d) - probe(act_d));
            emit("ln_bwd", shape, 2, plain_both - plain_fwd - probe(act_d));
        }
    }

    const ember::Shape act_ff{nb, s, ff};
    if (shown(act + std::to_string(ff))) {
        const std::string shape = act + std::to_string(ff);
        const FT x = randn(act_ff), g = randn(act_ff);
        if (want("gelu_fwd"))
            emit("gelu_fwd", shape, layers,
                 timed(o, [&] { (void)C::float_unary(ember::UnaryOp::Gelu, x); }));
        if (want("gelu_bwd"))
            // Autodiff's rule for gelu: the backend's one-pass gradient from the input.
            emit("gelu_bwd", shape, layers,
                 timed(o, [&] { (void)C::float_unary_backward(ember::UnaryOp::Gelu, g, x); }));
    }

    if (want("grad_add") && shown(act + std::to_string(d))) {
        // Per layer: the attention input's three projections (two additions; none with the
        // packed projection), the residual stream's gradient meeting the norm's after each of
        // the two blocks.
        const FT a = randn(act_d), b = randn(act_d);
        emit("grad_add", act + std::to_string(d), (packed ? 2 : 4) * layers,
             timed(o, [&] { (void)C::float_binary(ember::BinaryOp::Add, a, b); }));
    }

    const ember::Shape scores_shape{rows, vocab};
    if ((want("xent_fwd") || want("xent_bwd")) &&
        shown(std::to_string(rows) + "x" + std::to_string(vocab))) {
        const std::string shape = std::to_string(rows) + "x" + std::to_string(vocab);
        const auto scores = tracked<2>(randn(scores_shape));
        const auto targets = ember::Tensor<AD, 1>::random(
                                 ember::Shape{rows}, ember::Distribution::Uniform(0, double(vocab)))
                                 .int_();
        const auto loss = ember::nn::loss::CrossEntropyLossConfig{}.init<AD>();
        const Time fwd = timed(o, [&] { (void)loss.forward(scores, targets); });
        if (want("xent_fwd")) emit("xent_fwd", shape, 1, fwd);
        if (want("xent_bwd")) {
            // The loss is a scalar: its own backward, no seed to subtract.
            const Time both = timed(o, [&] { (void)loss.forward(scores, targets).backward(); });
            emit("xent_bwd", shape, 1, both - fwd);
        }
    }

    if ((want("embed_fwd") || want("embed_bwd")) && shown(act + std::to_string(d))) {
        const std::string shape = act + std::to_string(d);
        const auto token = tracked<2>(randn({vocab, d}, 0.02));
        const auto position = tracked<2>(randn({context, d}, 0.02));
        const auto batch = gpt::bench_batch<AD>(nb, s, 42, {});
        const auto positions = ember::Tensor<AD, 1, ember::Int>::arange(0, std::int64_t(s))
                                   .reshape<2>(std::array<std::size_t, 2>{1, s});
        const auto g = constant<3>(randn(act_d));
        auto embed = [&] {
            return ember::module::embedding(token, batch.inputs) +
                   ember::module::embedding(position, positions);
        };
        const Time fwd = timed(o, [&] { (void)embed(); });
        if (want("embed_fwd")) emit("embed_fwd", shape, 1, fwd);
        if (want("embed_bwd")) {
            const Time both = timed(o, [&] { (void)(embed() * g).sum().backward(); });
            emit("embed_bwd", shape, 1, both - fwd - probe(act_d));
        }
    }

    std::optional<Time> step;  // printed last, after the classes' totals
    if (want("adamw") || want("step")) {
        // The model and optimizer of bench_scale train --model gpt.
        gpt::GptConfig c;
        c.dropout = 0;
        c.context = std::max<std::size_t>(context, s);
        auto model = c.init<AD>();
        auto optim = ember::optim::AdamWConfig{}
                         .with_beta_2(0.95)
                         .with_epsilon(1e-8)
                         .with_weight_decay(0.1)
                         .init<gpt::Gpt<AD>>();
        const auto batch = gpt::bench_batch<AD>(nb, s, 42, {});
        auto grads_of = [&] {
            auto loss = model.loss(batch.inputs, batch.targets);
            return ember::optim::GradientsParams::from_grads(loss.backward(), model);
        };
        if (want("adamw")) {
            const auto grads = grads_of();
            emit("adamw",
                 std::to_string(model.num_params()) + "_params_" + std::to_string(grads.len()) +
                     "_tensors",
                 1, timed(o, [&] {
                     auto copy = grads;
                     model = optim.step(6e-4, std::move(model), std::move(copy));
                 }));
        }
        if (want("step")) {
            const Time t = timed(
                o,
                [&] {
                    auto grads = grads_of();
                    model = optim.step(6e-4, std::move(model), std::move(grads));
                },
                5);
            step = t;
        }
    }

    const Time sum = report.print_totals();
    std::printf(
        "{\"framework\": \"ember\", \"op\": \"sum\", \"total_cpu_ms\": %.3f, "
        "\"total_wall_ms\": %.3f, \"threads\": %zu}\n",
        sum.cpu, sum.wall, o.threads);
    if (step)
        std::printf(
            "{\"framework\": \"ember\", \"op\": \"step\", \"shape\": \"%zux%zu\", "
            "\"count\": 1, \"cpu_ms\": %.4f, \"wall_ms\": %.4f, \"threads\": %zu}\n",
            nb, s, step->cpu, step->wall, o.threads);
    return 0;
}
