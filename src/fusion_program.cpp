// The fused program's key and listing, and the fusion counters.
#include "ember/tensor/fusion_program.hpp"
#include "ember/tensor/fusion_check.hpp"

#include "ember/tensor/error.hpp"

#include <atomic>
#include <cstdlib>
#include <sstream>

namespace ember::fusion {
namespace {

std::atomic<std::uint64_t> g_launched{0}, g_fused{0}, g_compiled{0}, g_hits{0}, g_ops{0},
    g_epilogues{0};
std::atomic<bool> g_epilogues_on{[] {
    const char* e = std::getenv("EMBER_FUSION_EPILOGUE");
    return !(e && e[0] == '0' && e[1] == '\0');
}()};

const char* kind_name(OpKind k) {
    switch (k) {
        case OpKind::Unary:
            return "unary";
        case OpKind::Binary:
            return "binary";
        case OpKind::BinaryScalar:
            return "binary_scalar";
        case OpKind::Compare:
            return "compare";
        case OpKind::CompareScalar:
            return "compare_scalar";
        case OpKind::Where:
            return "where";
        case OpKind::MaskFill:
            return "mask_fill";
        case OpKind::Clamp:
            return "clamp";
        case OpKind::Cast:
            return "cast";
    }
    return "?";
}

}  // namespace

std::string Program::key() const {
    // Compact and unambiguous: every field of every input and instruction, in order. Scalar
    // slots are implied by the order of the instructions that use them.
    std::string k;
    k.reserve(8 + 2 * inputs.size() + 8 * instrs.size() + 2 * outputs.size());
    k.push_back(static_cast<char>('0' + rank));
    for (const auto& in : inputs) {
        k.push_back(static_cast<char>('a' + static_cast<int>(in.dtype)));
        k.push_back(in.dense ? 'd' : 's');
    }
    k.push_back('|');
    for (const auto& i : instrs) {
        k.push_back(static_cast<char>('A' + static_cast<int>(i.kind)));
        k.push_back(static_cast<char>(i.code));
        k.push_back(static_cast<char>('a' + static_cast<int>(i.dtype)));
        for (std::uint16_t r : {i.a, i.b, i.c}) {
            k.push_back(static_cast<char>(r & 0xff));
            k.push_back(static_cast<char>(r >> 8));
        }
    }
    k.push_back('|');
    for (std::uint16_t o : outputs) {
        k.push_back(static_cast<char>(o & 0xff));
        k.push_back(static_cast<char>(o >> 8));
    }
    if (reduce) {
        k.push_back('R');
        k.push_back(static_cast<char>('0' + static_cast<int>(reduce->op)));
        k.push_back(static_cast<char>(reduce->reg & 0xff));
        k.push_back(static_cast<char>(reduce->reg >> 8));
    }
    return k;
}

std::string Program::to_string() const {
    std::ostringstream os;
    for (std::size_t i = 0; i < inputs.size(); ++i)
        os << "r" << i << " = input " << dtype_name(inputs[i].dtype)
           << (inputs[i].dense ? " dense" : " strided") << "\n";
    for (std::size_t i = 0; i < instrs.size(); ++i) {
        const Instr& in = instrs[i];
        os << "r" << inputs.size() + i << " = " << kind_name(in.kind) << "#" << int(in.code) << " "
           << dtype_name(in.dtype) << " r" << in.a;
        if (operand_count(in.kind) >= 2) os << " r" << in.b;
        if (operand_count(in.kind) == 3) os << " r" << in.c;
        if (in.kind == OpKind::BinaryScalar || in.kind == OpKind::CompareScalar ||
            in.kind == OpKind::MaskFill || in.kind == OpKind::Clamp)
            os << " s" << in.s0;
        if (in.kind == OpKind::Clamp) os << " s" << in.s1;
        os << "\n";
    }
    os << "outputs:";
    for (auto o : outputs) os << " r" << o;
    if (reduce) {
        static const char* const names[] = {"sum", "mean", "prod", "max", "min", "any", "all"};
        os << "\nreduce: " << names[static_cast<int>(reduce->op)] << " of r" << reduce->reg
           << " along the last dim";
    }
    return os.str();
}

Stats stats() {
    return {g_launched.load(), g_fused.load(), g_compiled.load(),
            g_hits.load(),     g_ops.load(),   g_epilogues.load()};
}

bool matmul_epilogues() {
    return g_epilogues_on.load(std::memory_order_relaxed);
}
void set_matmul_epilogues(bool on) {
    g_epilogues_on.store(on, std::memory_order_relaxed);
}

void reset_stats() {
    g_launched = 0;
    g_fused = 0;
    g_compiled = 0;
    g_hits = 0;
    g_ops = 0;
    g_epilogues = 0;
}

namespace detail {
void count_launch(bool fused, std::size_t ops) {
    g_launched.fetch_add(1, std::memory_order_relaxed);
    if (fused) {
        g_fused.fetch_add(1, std::memory_order_relaxed);
        g_ops.fetch_add(ops, std::memory_order_relaxed);
    }
}
void count_compile() {
    g_compiled.fetch_add(1, std::memory_order_relaxed);
}
void count_cache_hit() {
    g_hits.fetch_add(1, std::memory_order_relaxed);
}
void count_epilogue() {
    g_epilogues.fetch_add(1, std::memory_order_relaxed);
}
}  // namespace detail

void check_program(const Program& p, std::size_t max_rank) {
    EMBER_CHECK(!p.instrs.empty() && (!p.outputs.empty() || p.reduce), Argument,
                "fused program: needs instructions and outputs");
    EMBER_CHECK(p.rank <= max_rank, Argument, "fused program: rank ", p.rank, " exceeds ",
                max_rank);
    auto type_ok = [](DType d) {
        return d == DType::F32 || d == DType::F64 || d == DType::I64 || d == DType::Bool;
    };
    const std::size_t n_in = p.inputs.size();
    for (const auto& in : p.inputs)
        EMBER_CHECK(type_ok(in.dtype), DType, "fused program: input dtype ", dtype_name(in.dtype),
                    " is not computed by fused kernels");
    for (std::size_t i = 0; i < p.instrs.size(); ++i) {
        const Instr& in = p.instrs[i];
        const std::size_t self = n_in + i;
        EMBER_CHECK(type_ok(in.dtype), DType, "fused program: instruction ", i, " has dtype ",
                    dtype_name(in.dtype));
        EMBER_CHECK(in.a < self && in.b < self && in.c < self, Argument,
                    "fused program: instruction ", i, " reads a register not yet written");
        if (in.kind == OpKind::Where)
            EMBER_CHECK(p.reg_dtype(in.a) == DType::Bool, DType, "fused program: instruction ", i,
                        ": where needs a bool mask");
        if (in.kind == OpKind::MaskFill)
            EMBER_CHECK(p.reg_dtype(in.b) == DType::Bool, DType, "fused program: instruction ", i,
                        ": mask_fill needs a bool mask");
    }
    for (auto o : p.outputs)
        EMBER_CHECK(o >= n_in && o < n_in + p.instrs.size(), Argument,
                    "fused program: output register ", o, " is not an instruction's");
    if (p.reduce) {
        const auto op = p.reduce->op;
        EMBER_CHECK(op == ReduceOp::Sum || op == ReduceOp::Mean || op == ReduceOp::Max ||
                        op == ReduceOp::Min,
                    Argument, "fused program: reduction ", int(op),
                    " is not fused (sum, mean, max and min are)");
        EMBER_CHECK(p.reduce->reg >= n_in && p.reduce->reg < n_in + p.instrs.size(), Argument,
                    "fused program: the reduced register ", p.reduce->reg,
                    " is not an instruction's");
        const DType d = p.reg_dtype(p.reduce->reg);
        EMBER_CHECK(d == DType::F32 || d == DType::F64, DType,
                    "fused program: reductions are fused for float registers, not ", dtype_name(d));
        EMBER_CHECK(p.rank >= 1, Argument, "fused program: a reduction needs a rank of at least 1");
    }
}

Shape reduced_shape(const Shape& shape) {
    EMBER_CHECK(shape.rank() >= 1 && shape.num_elements() > 0, Shape,
                "fused program: a reduction along the last dim needs a non-empty shape of rank 1 "
                "or more, got ",
                shape.to_string());
    Shape rs = shape;
    rs[rs.rank() - 1] = 1;
    return rs;
}

}  // namespace ember::fusion
