// GLSL for fused programs (fusion.hpp describes the shader's interface). Every instruction
// becomes one statement over typed registers; the element functions are shaders/common.glsl's,
// the very ones the unfused kernel (shaders/elementwise.comp) calls, so fused and unfused
// results agree.
#include <sstream>

#include "ember/tensor/error.hpp"
#include "ember/tensor/fusion_check.hpp"
#include "fusion.hpp"

namespace ember::detail::vk {

extern const char* const kCommonGlsl;  // shaders/common.glsl (generated common_glsl.cpp)

namespace {

using fusion::Instr;
using fusion::OpKind;
using fusion::Program;

bool is_f(DType d) {
    return d == DType::F32 || d == DType::F64;  // f64 is stored and computed as f32 here
}
const char* glsl_type(DType d) {
    return is_f(d) ? "float" : (d == DType::I64 ? "int64_t" : "bool");
}
ScalarKind scalar_kind(DType d) {
    return is_f(d) ? ScalarKind::F32 : (d == DType::I64 ? ScalarKind::I64 : ScalarKind::Bool);
}
std::string reg(std::size_t r) {
    return "r" + std::to_string(r);
}

// Helpers the unfused kernel writes inline (elementwise.comp's unary()), as functions.
constexpr const char* kFusedHelpers = R"glsl(
float sigmoid_f(float v) {
    if (v >= 0.0) return 1.0 / (1.0 + exp(-v));
    float e = exp(v);
    return e / (1.0 + e);
}
float relu_f(float v) { return v > 0.0 ? v : (isnan(v) ? v : 0.0); }
float gelu_f(float v) { return v * 0.5 * (1.0 + erf_f(v * 0.70710678118654752)); }
int64_t abs_i(int64_t v) { return v < 0l ? -v : v; }
int64_t sign_i(int64_t v) { return v > 0l ? 1l : (v < 0l ? -1l : 0l); }
int64_t b2i(bool v) { return v ? 1l : 0l; }
)glsl";

class Gen {
  public:
    Gen(const Program& p, FusedLayout& l) : p_(p), l_(l) {}

    std::string scalar(std::uint16_t slot) const {
        const std::uint32_t w = l_.scalar_word[slot];
        const ScalarKind k = l_.scalar_kinds[slot];
        const std::string a = l_.scalars_in_push ? "pc.s[" + std::to_string(w) + "]"
                                                 : "uint(p[" + std::to_string(w) + "])";
        const std::string b = l_.scalars_in_push ? "pc.s[" + std::to_string(w + 1) + "]"
                                                 : "uint(p[" + std::to_string(w + 1) + "])";
        if (k == ScalarKind::F32) return "uintBitsToFloat(" + a + ")";
        if (k == ScalarKind::I64) return "join64(" + a + ", " + b + ")";
        return "(" + a + " != 0u)";
    }

    std::string unary(const Instr& in) const {
        const auto op = static_cast<UnaryOp>(in.code);
        const DType d = p_.reg_dtype(in.a);
        const std::string a = reg(in.a);
        if (d == DType::Bool) {
            EMBER_CHECK(op == UnaryOp::Not, DType, "fused program: unary op ", int(in.code),
                        " on a bool register");
            return "!" + a;
        }
        if (d == DType::I64) {
            switch (op) {
                case UnaryOp::Neg:
                    return "-" + a;
                case UnaryOp::Abs:
                    return "abs_i(" + a + ")";
                case UnaryOp::Sign:
                    return "sign_i(" + a + ")";
                case UnaryOp::Relu:
                    return "(" + a + " > 0l ? " + a + " : 0l)";
                case UnaryOp::IsNan:
                    return "false";
                case UnaryOp::Not:
                    return "(~" + a + ")";
                default:
                    EMBER_CHECK(false, DType, "fused program: unary op ", int(in.code),
                                " on an int register");
            }
            return a;
        }
        static constexpr const char* f[] = {"-",         "abs",    "exp",    "log",       "log1p_f",
                                            "sqrt",      "sin",    "cos",    "tanh_f",    "erf_f",
                                            "1.0 /",     "floor",  "ceil",   "roundEven", "sign_f",
                                            "sigmoid_f", "relu_f", "gelu_f", "isnan"};
        EMBER_CHECK(in.code < sizeof(f) / sizeof(f[0]), DType, "fused program: unary op ",
                    int(in.code), " on a float register");
        if (op == UnaryOp::Neg || op == UnaryOp::Recip)
            return std::string("(") + f[in.code] + " " + a + ")";
        return std::string(f[in.code]) + "(" + a + ")";
    }

    // Tensor-tensor and tensor-scalar ops alike: `u` and `w` are operand expressions.
    std::string binary(std::uint8_t code, DType d, std::string u, std::string w) const {
        auto op = static_cast<BinaryOp>(code);
        if (op >= BinaryOp::RSub && op <= BinaryOp::RRem) {  // the scalar on the left
            std::swap(u, w);
            op = op == BinaryOp::RSub   ? BinaryOp::Sub
                 : op == BinaryOp::RDiv ? BinaryOp::Div
                 : op == BinaryOp::RPow ? BinaryOp::Pow
                                        : BinaryOp::Rem;
        }
        if (d == DType::Bool) {
            if (op == BinaryOp::And || op == BinaryOp::Mul || op == BinaryOp::Min)
                return "(" + u + " && " + w + ")";
            if (op == BinaryOp::Xor) return "(" + u + " != " + w + ")";
            return "(" + u + " || " + w + ")";
        }
        const bool i = d == DType::I64;
        if (i) {  // the bitwise ops, as elementwise.comp's
            if (op == BinaryOp::And) return "(" + u + " & " + w + ")";
            if (op == BinaryOp::Or) return "(" + u + " | " + w + ")";
            if (op == BinaryOp::Xor) return "(" + u + " ^ " + w + ")";
            if (op == BinaryOp::Shl) return "shl_i(" + u + ", " + w + ")";
            if (op == BinaryOp::Shr) return "shr_i(" + u + ", " + w + ")";
        }
        EMBER_CHECK(op != BinaryOp::And && op != BinaryOp::Or && op != BinaryOp::Xor &&
                        op != BinaryOp::Shl && op != BinaryOp::Shr,
                    DType, "fused program: bitwise op ", int(code), " on a ", glsl_type(d),
                    " register");
        switch (op) {
            case BinaryOp::Add:
                return "(" + u + " + " + w + ")";
            case BinaryOp::Sub:
                return "(" + u + " - " + w + ")";
            case BinaryOp::Mul:
                return "(" + u + " * " + w + ")";
            case BinaryOp::Div:
                return (i ? "floor_div_i(" : "(") + u + (i ? ", " : " / ") + w + ")";
            case BinaryOp::Rem:
                return (i ? "py_rem_i(" : "py_rem_f(") + u + ", " + w + ")";
            case BinaryOp::Pow:
                return (i ? "pow_i(" : "pow_f(") + u + ", " + w + ")";
            case BinaryOp::Max:
                return i ? "max(" + u + ", " + w + ")" : "nan_max(" + u + ", " + w + ")";
            default:
                return i ? "min(" + u + ", " + w + ")" : "nan_min(" + u + ", " + w + ")";
        }
    }

    std::string compare(std::uint8_t code, DType d, std::string u, std::string w) const {
        static constexpr const char* ops[] = {"==", "!=", ">", ">=", "<", "<="};
        EMBER_CHECK(code < 6, Argument, "fused program: compare op ", int(code));
        if (d == DType::Bool) {  // as int64 0/1, like the unfused kernel
            u = "b2i(" + u + ")";
            w = "b2i(" + w + ")";
        }
        return "(" + u + " " + ops[code] + " " + w + ")";
    }

    std::string cast(DType from, DType to, const std::string& a) const {
        if (is_f(from) == is_f(to) && (from == to || is_f(from))) return a;
        if (to == DType::Bool) return is_f(from) ? "(" + a + " != 0.0)" : "(" + a + " != 0l)";
        if (from == DType::Bool) return is_f(to) ? "(" + a + " ? 1.0 : 0.0)" : "b2i(" + a + ")";
        return std::string(glsl_type(to)) + "(" + a + ")";  // float <-> int64 (truncates)
    }

    std::string instr(const Instr& in) const {
        const DType da = p_.reg_dtype(in.a);
        switch (in.kind) {
            case OpKind::Unary:
                return unary(in);
            case OpKind::Binary:
                return binary(in.code, da, reg(in.a), reg(in.b));
            case OpKind::BinaryScalar:
                return binary(in.code, da, reg(in.a), scalar(in.s0));
            case OpKind::Compare:
                return compare(in.code, da, reg(in.a), reg(in.b));
            case OpKind::CompareScalar:
                return compare(in.code, da, reg(in.a), scalar(in.s0));
            case OpKind::Where:
                return "(" + reg(in.a) + " ? " + reg(in.b) + " : " + reg(in.c) + ")";
            case OpKind::MaskFill:
                return "(" + reg(in.b) + " ? " + scalar(in.s0) + " : " + reg(in.a) + ")";
            case OpKind::Clamp: {
                const std::string x = reg(in.a), lo = scalar(in.s0), hi = scalar(in.s1);
                const std::string mm = "min(max(" + x + ", " + lo + "), " + hi + ")";
                return is_f(da) ? "(isnan(" + x + ") ? " + x + " : " + mm + ")" : mm;
            }
            case OpKind::Cast:
                return cast(da, in.dtype, reg(in.a));
        }
        return reg(in.a);
    }

  private:
    const Program& p_;
    FusedLayout& l_;
};

// Per-element load and store of word buffer `buf` at element index `j` (an expression).
std::string load(DType d, const std::string& buf, const std::string& j) {
    if (is_f(d)) return "LOAD_F(" + buf + ", " + j + ")";
    if (d == DType::I64) return "LOAD_I(" + buf + ", " + j + ")";
    return "LOAD_B(" + buf + ", " + j + ")";
}
std::string store(DType d, const std::string& buf, const std::string& j, const std::string& v) {
    if (is_f(d)) return "STORE_F(" + buf + ", " + j + ", " + v + ");";
    if (d == DType::I64) return "STORE_I(" + buf + ", " + j + ", " + v + ")";
    return "STORE_B(" + buf + ", " + j + ", " + v + ");";
}

}  // namespace

namespace {

// The statements for element e (a uint in scope): each input's index j<k> (dense inputs at
// offset + e, strided ones through their strides), body(), the elementwise outputs stored, and,
// when a reduction ends the program, the reduced register left in `yr`.
void element(std::ostringstream& s, const Program& p, const FusedLayout& l, const char* ind) {
    const std::size_t n_in = p.inputs.size(), n_out = p.outputs.size();
    bool any_strided = false;
    for (bool st : l.strided) any_strided = any_strided || st;
    for (std::size_t k = 0; k < n_in; ++k)
        s << ind << "int j" << k << " = p[" << k << "]" << (l.strided[k] ? "" : " + int(e)")
          << ";\n";
    if (any_strided && p.rank > 0) {
        s << ind << "uint rem = e, c;\n";
        for (std::size_t d = p.rank; d-- > 0;) {
            if (d > 0)
                s << ind << "{ uint s = uint(p[" << l.shape_word + d
                  << "]); c = rem % s; rem /= s; }\n";
            else
                s << ind << "c = rem;\n";
            for (std::size_t k = 0; k < n_in; ++k)
                if (l.strided[k])
                    s << ind << "j" << k << " += int(c) * p[" << l.stride_word[k] + d << "];\n";
        }
    }
    for (std::size_t k = 0; k < n_out; ++k)
        s << ind << glsl_type(p.reg_dtype(p.outputs[k])) << " y" << k << ";\n";
    s << ind << "body(";
    for (std::size_t k = 0; k < n_in; ++k)
        s << (k ? ", " : "")
          << load(p.inputs[k].dtype, "i" + std::to_string(k), "j" + std::to_string(k));
    for (std::size_t k = 0; k < n_out; ++k) s << ", y" << k;
    if (p.reduce) s << (n_in + n_out ? ", " : "") << "yr";
    s << ");\n";
    for (std::size_t k = 0; k < n_out; ++k)
        s << ind
          << store(p.reg_dtype(p.outputs[k]), "o" + std::to_string(k), "int(e)",
                   "y" + std::to_string(k))
          << "\n";
}

// main() of a program that ends in a reduction along the last dim (f32): a workgroup a row
// (pc.n elements in rows of pc.vec), each thread a strided part of the row's columns, the
// partial results combined in shared memory.
void emit_rows_main(std::ostringstream& s, const Program& p, const FusedLayout& l) {
    const auto op = p.reduce->op;
    const std::string init = op == ReduceOp::Max   ? "uintBitsToFloat(0xff800000u)"
                             : op == ReduceOp::Min ? "uintBitsToFloat(0x7f800000u)"
                                                   : "0.0";
    auto combine = [&](const std::string& a, const std::string& b) {
        if (op == ReduceOp::Max) return "nan_max(" + a + ", " + b + ")";
        if (op == ReduceOp::Min) return "nan_min(" + a + ", " + b + ")";
        return "(" + a + " + " + b + ")";
    };
    s << "\nshared float red_part[WG_SIZE];\n\nvoid main() {\n"
      << "    uint n = pc.n, cols = pc.vec, rows = n / cols;\n"
      << "    uint lid = gl_LocalInvocationID.x;\n"
      << "    uint groups = gl_NumWorkGroups.x * gl_NumWorkGroups.y;\n"
      << "    for (uint row = group_id(); row < rows; row += groups) {\n"
      << "        float acc = " << init << ";\n"
      << "        for (uint col = lid; col < cols; col += WG_SIZE) {\n"
      << "            uint e = row * cols + col;\n"
      << "            float yr;\n";
    element(s, p, l, "            ");
    s << "            acc = " << combine("acc", "yr") << ";\n        }\n"
      << "        red_part[lid] = acc;\n        barrier();\n"
      << "        for (uint h = WG_SIZE / 2u; h > 0u; h >>= 1u) {\n"
      << "            if (lid < h) red_part[lid] = "
      << combine("red_part[lid]", "red_part[lid + h]") << ";\n            barrier();\n        }\n"
      << "        if (lid == 0u) "
      << store(DType::F32, "or", "int(row)",
               op == ReduceOp::Mean ? "red_part[0] / float(cols)" : "red_part[0]")
      << "\n        barrier();\n    }\n}\n";
}

}  // namespace

std::string generate_glsl(const Program& p, FusedLayout& l) {
    fusion::check_program(p, kMaxRank);
    const std::size_t n_in = p.inputs.size(), n_out = p.outputs.size();
    l = FusedLayout{};
    l.rank = p.rank;
    for (const auto& in : p.inputs) {
        l.strided.push_back(!in.dense);
        l.all_dense = l.all_dense && in.dense;
    }
    // Scalar slots: each is used by one instruction, whose operand says its type.
    std::size_t n_slots = 0;
    for (const Instr& in : p.instrs) {
        const bool one = in.kind == OpKind::BinaryScalar || in.kind == OpKind::CompareScalar ||
                         in.kind == OpKind::MaskFill || in.kind == OpKind::Clamp;
        if (!one) continue;
        const std::size_t top = (in.kind == OpKind::Clamp ? in.s1 : in.s0) + 1u;
        if (top > n_slots) n_slots = top;
    }
    l.scalar_kinds.assign(n_slots, ScalarKind::F32);
    for (const Instr& in : p.instrs) {
        const ScalarKind k = scalar_kind(p.reg_dtype(in.a));
        if (in.kind == OpKind::BinaryScalar || in.kind == OpKind::CompareScalar ||
            in.kind == OpKind::MaskFill || in.kind == OpKind::Clamp)
            l.scalar_kinds[in.s0] = k;
        if (in.kind == OpKind::Clamp) l.scalar_kinds[in.s1] = k;
    }
    // Parameter words: offsets, shape, strides; the scalars go in push constants if they fit.
    std::uint32_t w = static_cast<std::uint32_t>(n_in);
    l.shape_word = w;
    w += static_cast<std::uint32_t>(p.rank);
    for (std::size_t k = 0; k < n_in; ++k) {
        l.stride_word.push_back(w);
        if (l.strided[k]) w += static_cast<std::uint32_t>(p.rank);
    }
    for (ScalarKind k : l.scalar_kinds) l.scalar_words += k == ScalarKind::I64 ? 2 : 1;
    l.scalars_in_push = 2 + l.scalar_words <= kPushBudgetWords;
    std::uint32_t sw = l.scalars_in_push ? 0 : w;
    for (ScalarKind k : l.scalar_kinds) {
        l.scalar_word.push_back(sw);
        sw += k == ScalarKind::I64 ? 2 : 1;
    }
    l.params_words = l.scalars_in_push ? w : sw;
    l.push_words = 2 + (l.scalars_in_push ? l.scalar_words : 0);

    Gen g(p, l);
    std::ostringstream s;
    s << "#version 450\n" << kCommonGlsl << "\n// ---- fused program ----\n";
    s << "layout(local_size_x_id = 0) in;\n";
    s << "layout(std430, binding = 0) readonly buffer Params { int p[]; };\n";
    auto buffer = [&](std::size_t binding, const char* qual, const std::string& name) {
        s << "layout(std430, binding = " << binding << ") " << qual << " buffer B" << name
          << " { uint " << name << "[]; };\n";
        if (l.all_dense)  // the same memory as 16-byte words, for the vector path
            s << "layout(std430, binding = " << binding << ") " << qual << " buffer B" << name
              << "v { uvec4 " << name << "v[]; };\n";
    };
    for (std::size_t k = 0; k < n_out; ++k) buffer(1 + k, "writeonly", "o" + std::to_string(k));
    // A reduction's output follows the elementwise ones (the launcher binds it last of them).
    const std::size_t n_red = p.reduce ? 1 : 0;
    if (p.reduce) buffer(1 + n_out, "writeonly", "or");
    for (std::size_t k = 0; k < n_in; ++k)
        buffer(1 + n_out + n_red + k, "readonly", "i" + std::to_string(k));
    s << "layout(push_constant) uniform Push { uint n; uint vec;";
    if (l.scalars_in_push && l.scalar_words) s << " uint s[" << l.scalar_words << "];";
    s << " } pc;\n" << kFusedHelpers;

    // The element function: inputs in, outputs out, every register a local.
    s << "\nvoid body(";
    for (std::size_t k = 0; k < n_in; ++k)
        s << (k ? ", " : "") << glsl_type(p.inputs[k].dtype) << " " << reg(k);
    for (std::size_t k = 0; k < n_out; ++k)
        s << ", out " << glsl_type(p.reg_dtype(p.outputs[k])) << " y" << k;
    if (p.reduce) s << (n_in + n_out ? ", " : "") << "out float yr";
    s << ") {\n";
    for (std::size_t i = 0; i < p.instrs.size(); ++i)
        s << "    " << glsl_type(p.instrs[i].dtype) << " " << reg(n_in + i) << " = "
          << g.instr(p.instrs[i]) << ";\n";
    for (std::size_t k = 0; k < n_out; ++k)
        s << "    y" << k << " = " << reg(p.outputs[k]) << ";\n";
    if (p.reduce) s << "    yr = " << reg(p.reduce->reg) << ";\n";
    s << "}\n";
    if (p.reduce) {
        emit_rows_main(s, p, l);
        return s.str();
    }
    s << "\nvoid main() {\n"
      << "    uint gid = global_id();\n"
      << "    uint stride = gl_NumWorkGroups.x * gl_NumWorkGroups.y * WG_SIZE;\n"
      << "    uint n = pc.n;\n    uint start = 0u;\n";

    if (l.all_dense) {
        // Four elements a thread: one uvec4 of each 32-bit buffer, two of each int64 one. The
        // host sets pc.vec only when every input's offset is 16-byte aligned.
        s << "    if (pc.vec != 0u) {\n        uint nq = n >> 2;\n";
        for (std::size_t k = 0; k < n_in; ++k)
            s << "        int b" << k << " = p[" << k << "] >> "
              << (p.inputs[k].dtype == DType::I64 ? 1 : 2) << ";\n";
        s << "        for (uint q = gid; q < nq; q += stride) {\n";
        for (std::size_t k = 0; k < n_in; ++k) {
            if (p.inputs[k].dtype == DType::I64)
                s << "            uvec4 w" << k << "a = i" << k << "v[b" << k << " + 2 * int(q)], w"
                  << k << "b = i" << k << "v[b" << k << " + 2 * int(q) + 1];\n";
            else
                s << "            uvec4 w" << k << " = i" << k << "v[b" << k << " + int(q)];\n";
        }
        static constexpr const char* lane[] = {"x", "y", "z", "w"};
        for (std::size_t k = 0; k < n_out; ++k)
            s << "            " << glsl_type(p.reg_dtype(p.outputs[k])) << " y" << k << "_0, y" << k
              << "_1, y" << k << "_2, y" << k << "_3;\n";
        for (int e = 0; e < 4; ++e) {
            s << "            body(";
            for (std::size_t k = 0; k < n_in; ++k) {
                const std::string wk = "w" + std::to_string(k);
                s << (k ? ", " : "");
                const DType d = p.inputs[k].dtype;
                if (is_f(d))
                    s << "uintBitsToFloat(" << wk << "." << lane[e] << ")";
                else if (d == DType::Bool)
                    s << "(" << wk << "." << lane[e] << " != 0u)";
                else {
                    const std::string half = wk + (e < 2 ? "a" : "b");
                    const int lo = (e % 2) * 2;
                    s << "join64(" << half << "." << lane[lo] << ", " << half << "." << lane[lo + 1]
                      << ")";
                }
            }
            for (std::size_t k = 0; k < n_out; ++k) s << ", y" << k << "_" << e;
            s << ");\n";
        }
        for (std::size_t k = 0; k < n_out; ++k) {
            const DType d = p.reg_dtype(p.outputs[k]);
            const std::string y = "y" + std::to_string(k) + "_", o = "o" + std::to_string(k) + "v";
            if (is_f(d))
                s << "            " << o << "[q] = uvec4(floatBitsToUint(" << y
                  << "0), floatBitsToUint(" << y << "1), floatBitsToUint(" << y
                  << "2), floatBitsToUint(" << y << "3));\n";
            else if (d == DType::Bool)
                s << "            " << o << "[q] = uvec4(" << y << "0 ? 1u : 0u, " << y
                  << "1 ? 1u : 0u, " << y << "2 ? 1u : 0u, " << y << "3 ? 1u : 0u);\n";
            else
                s << "            " << o << "[2 * q] = uvec4(split64(" << y << "0), split64(" << y
                  << "1));\n            " << o << "[2 * q + 1] = uvec4(split64(" << y
                  << "2), split64(" << y << "3));\n";
        }
        s << "        }\n        start = nq << 2;\n    }\n";
    }

    // One element a thread: dense inputs at offset + e, strided ones through their strides.
    s << "    for (uint e = start + gid; e < n; e += stride) {\n";
    element(s, p, l, "        ");
    s << "    }\n}\n";
    return s.str();
}

}  // namespace ember::detail::vk
