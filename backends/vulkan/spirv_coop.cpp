// SPV_NV_cooperative_matrix → SPV_KHR_cooperative_matrix (spirv_coop.hpp). The NV and KHR
// instructions differ in three ways: the KHR matrix type names its use (A, B, accumulator), the
// KHR loads and stores take a layout constant (an integer) where NV takes a bool, and the
// stride moves behind the layout. Everything else is copied. For workgroup-scope matrices
// (nv2), loads become tensor loads as well.
#include "spirv_coop.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <map>
#include <set>
#include <string>

#define SPV_ENABLE_UTILITY_CODE
#include <spirv/unified1/spirv.hpp>

#include "ember/tensor/error.hpp"

namespace ember::detail::vk {

namespace {

using u32 = std::uint32_t;

// SPV_KHR_cooperative_matrix and SPV_KHR_bfloat16 postdate Debian 12's SPIR-V headers.
constexpr u32 kOpTypeCoopKhr = 4456, kOpCoopLoadKhr = 4457, kOpCoopStoreKhr = 4458,
              kOpCoopMulAddKhr = 4459, kOpCoopLengthKhr = 4460;
constexpr u32 kCapCoopKhr = 6022, kCapBf16Type = 5116, kCapBf16Coop = 5118;
constexpr u32 kEncodingBf16 = 0;  // OpTypeFloat's FP encoding operand: BFloat16KHR
constexpr u32 kUseA = 0, kUseB = 1, kUseAcc = 2;
constexpr u32 kRowMajor = 0, kColumnMajor = 1;
// SPV_NV_cooperative_matrix2 and SPV_NV_tensor_addressing (likewise newer).
constexpr u32 kOpCoopLoadTensorNv = 5367, kOpTypeTensorLayoutNv = 5370,
              kOpCreateTensorLayoutNv = 5372, kOpTensorLayoutSetDimensionNv = 5373,
              kOpTensorLayoutSetStrideNv = 5374;
constexpr u32 kCapCoopTensorAddressingNv = 5433, kCapTensorAddressingNv = 5439;

constexpr u32 op(spv::Op o) {
    return static_cast<u32>(o);
}

struct Inst {
    std::size_t at;  // word offset of the instruction
    u32 count, code;
};

/// An instruction's first six words, zero past its end: the most any rule below reads, so that a
/// truncated instruction in a malformed module reads zeros (no valid id) instead of its
/// neighbour's words.
using Words = std::array<u32, 6>;
Words first_words(std::span<const u32> words, const Inst& in) {
    Words w{};
    for (u32 k = 0; k < in.count && k < w.size(); ++k) w[k] = words[in.at + k];
    return w;
}

u32 head(u32 count, u32 code) {
    return count << 16 | code;
}

/// OpExtension / OpCapability words.
std::vector<u32> extension(const std::string& name) {
    std::vector<u32> w{0};
    const std::size_t n = name.size() / 4 + 1;  // the terminating NUL included
    for (std::size_t i = 0; i < n; ++i) {
        u32 v = 0;
        for (std::size_t b = 0; b < 4; ++b) {
            const std::size_t c = i * 4 + b;
            if (c < name.size()) v |= u32(static_cast<unsigned char>(name[c])) << (8 * b);
        }
        w.push_back(v);
    }
    w[0] = head(static_cast<u32>(w.size()), op(spv::OpExtension));
    return w;
}

std::string literal_string(std::span<const u32> w) {
    std::string s;
    for (u32 v : w)
        for (int b = 0; b < 4; ++b) {
            const char c = static_cast<char>((v >> (8 * b)) & 0xff);
            if (c == '\0') return s;
            s.push_back(c);
        }
    return s;
}

}  // namespace

std::vector<u32> coop_nv_to_khr(std::span<const u32> words, CoopElement elem, bool nv2) {
    EMBER_CHECK(words.size() >= 5 && words[0] == spv::MagicNumber, Format,
                "coop_nv_to_khr: not a SPIR-V module (", words.size(), " words)");
    std::vector<Inst> insts;
    for (std::size_t at = 5; at < words.size();) {
        const u32 count = words[at] >> 16, code = words[at] & 0xffff;
        EMBER_CHECK(count > 0 && at + count <= words.size(), Format,
                    "coop_nv_to_khr: malformed instruction at word ", at, " (opcode ", code, ", ",
                    count, " words, module of ", words.size(), ")");
        insts.push_back({at, count, code});
        at += count;
    }

    // What the rewrite needs to know: the value → type map (to find the matrix types that
    // the multiply-adds read), the bool constants, a 32-bit integer type, the 16-bit float.
    std::map<u32, u32> type_of;
    std::map<u32, u32> roles;  // matrix type → bit set of uses
    std::set<u32> coop_types, false_ids, true_ids;
    std::map<u32, u32> component;  // matrix type → component type
    std::map<u32, std::pair<u32, u32>> dims;  // matrix type → its rows and columns (ids)
    std::map<u32, u32> float_width;
    u32 int32 = 0, half = 0;
    bool int32_signed = false;
    for (const Inst& in : insts) {
        const Words w = first_words(words, in);
        bool has_result = false, has_type = false;
        spv::HasResultAndType(static_cast<spv::Op>(in.code), &has_result, &has_type);
        if (has_result && has_type && in.count >= 3) type_of[w[2]] = w[1];
        if (in.code == op(spv::OpTypeInt) && in.count >= 4 && w[2] == 32 && (!int32 || !w[3])) {
            int32 = w[1];
            int32_signed = w[3] != 0;
        }
        if (in.code == op(spv::OpTypeFloat) && in.count >= 3) {
            float_width[w[1]] = w[2];
            if (w[2] == 16) half = w[1];
        }
        if (in.code == op(spv::OpConstantFalse)) false_ids.insert(w[2]);
        if (in.code == op(spv::OpConstantTrue)) true_ids.insert(w[2]);
        if (in.code == op(spv::OpTypeCooperativeMatrixNV)) {
            EMBER_CHECK(in.count == 6, Format, "coop_nv_to_khr: a matrix type of ", in.count,
                        " words");
            coop_types.insert(w[1]);
            component[w[1]] = w[2];
            dims[w[1]] = {w[4], w[5]};
        }
        if (in.code == op(spv::OpCooperativeMatrixMulAddNV)) {
            EMBER_CHECK(in.count == 6, Format, "coop_nv_to_khr: a multiply-add of ", in.count,
                        " words");
            roles[type_of[w[3]]] |= 1u << kUseA;
            roles[type_of[w[4]]] |= 1u << kUseB;
            roles[w[1]] |= 1u << kUseAcc;
            roles[type_of[w[5]]] |= 1u << kUseAcc;
        }
    }
    EMBER_CHECK(int32, Format, "coop_nv_to_khr: the module declares no 32-bit integer type");
    // Tensor layouts take unsigned dimension counts and clamp modes.
    EMBER_CHECK(!nv2 || !int32_signed, Format,
                "coop_nv_to_khr: tensor loads need a module with a 32-bit unsigned integer type");
    std::map<u32, u32> use;
    for (u32 t : coop_types) {
        const u32 r = roles[t];
        EMBER_CHECK(r == 0 || (r & (r - 1)) == 0, Format, "coop_nv_to_khr: matrix type %", t,
                    " is used in more than one role of a multiply-add (uses mask ", r, ")");
        // A matrix no multiply-add reads: an accumulator if it holds f32, else an A operand.
        use[t] = r ? static_cast<u32>(std::countr_zero(r))
                   : (float_width[component[t]] == 32 ? kUseAcc : kUseA);
    }
    if (elem == CoopElement::BF16) {
        EMBER_CHECK(half, Format, "coop_nv_to_khr: bf16 asked of a module with no 16-bit float");
        // The 16-bit float may only be a matrix component: bf16 has no arithmetic of its own.
        for (const Inst& in : insts) {
            const Words w = first_words(words, in);
            const bool element_of =
                (in.code == op(spv::OpTypeVector) || in.code == op(spv::OpTypeArray) ||
                 in.code == op(spv::OpTypeRuntimeArray)) &&
                w[2] == half;
            const bool pointee = in.code == op(spv::OpTypePointer) && w[3] == half;
            bool has_result = false, has_type = false;
            spv::HasResultAndType(static_cast<spv::Op>(in.code), &has_result, &has_type);
            EMBER_CHECK(!element_of && !pointee && !(has_type && w[1] == half), Format,
                        "coop_nv_to_khr: bf16 asked of a module that computes on its 16-bit "
                        "floats (opcode ",
                        in.code, " at word ", in.at, ")");
        }
    }

    u32 bound = words[3];
    const u32 c0 = bound++, c1 = bound++, c2 = bound++;  // integer constants 0, 1, 2
    // nv2: a 2-d tensor layout type (dimension count c2). Its clamp mode is c1, Constant (zeros
    // past the layout's dimensions) although the loads never leave them: on NVIDIA's H100 driver
    // (580) that mode takes a path two to three times faster than Undefined's.
    const u32 layout_type = nv2 ? bound++ : 0;

    auto layout_of = [&](u32 bool_id) {
        EMBER_CHECK(false_ids.count(bool_id) || true_ids.count(bool_id), Format,
                    "coop_nv_to_khr: a load or store whose column-major flag %", bool_id,
                    " is not a constant");
        return true_ids.count(bool_id) ? kColumnMajor : kRowMajor;
    };
    auto constant = [&](u32 v) { return v == 0 ? c0 : (v == 1 ? c1 : c2); };

    std::vector<u32> out(words.begin(), words.begin() + 5);
    out.reserve(words.size() + 64);
    for (const Inst& in : insts) {
        const Words w = first_words(words, in);
        const std::span<const u32> all = words.subspan(in.at, in.count);
        switch (in.code) {
            case op(spv::OpCapability):
                if (w[1] == static_cast<u32>(spv::CapabilityCooperativeMatrixNV)) {
                    out.insert(out.end(), {head(2, op(spv::OpCapability)), kCapCoopKhr});
                    if (elem == CoopElement::BF16)
                        out.insert(out.end(), {head(2, op(spv::OpCapability)), kCapBf16Type,
                                               head(2, op(spv::OpCapability)), kCapBf16Coop});
                    if (nv2)
                        out.insert(out.end(),
                                   {head(2, op(spv::OpCapability)), kCapTensorAddressingNv,
                                    head(2, op(spv::OpCapability)), kCapCoopTensorAddressingNv});
                    continue;
                }
                break;
            case op(spv::OpExtension):
                if (literal_string(all.subspan(1)) == "SPV_NV_cooperative_matrix") {
                    const auto e = extension("SPV_KHR_cooperative_matrix");
                    out.insert(out.end(), e.begin(), e.end());
                    if (elem == CoopElement::BF16) {
                        const auto b = extension("SPV_KHR_bfloat16");
                        out.insert(out.end(), b.begin(), b.end());
                    }
                    if (nv2)
                        for (const char* x :
                             {"SPV_NV_cooperative_matrix2", "SPV_NV_tensor_addressing"}) {
                            const auto n = extension(x);
                            out.insert(out.end(), n.begin(), n.end());
                        }
                    continue;
                }
                break;
            case op(spv::OpTypeInt):
                if (w[1] == int32) {
                    out.insert(out.end(), all.begin(), all.end());
                    for (u32 v = 0; v < 3; ++v)
                        out.insert(out.end(),
                                   {head(4, op(spv::OpConstant)), int32, constant(v), v});
                    if (nv2)
                        out.insert(out.end(),
                                   {head(4, kOpTypeTensorLayoutNv), layout_type, c2, c1});
                    continue;
                }
                break;
            case op(spv::OpTypeFloat):
                if (elem == CoopElement::BF16 && w[1] == half) {
                    out.insert(out.end(), {head(4, op(spv::OpTypeFloat)), half, 16, kEncodingBf16});
                    continue;
                }
                break;
            case op(spv::OpTypeCooperativeMatrixNV):
                out.insert(out.end(), {head(7, kOpTypeCoopKhr), w[1], w[2], w[3], w[4], w[5],
                                       constant(use[w[1]])});
                continue;
            case op(spv::OpCooperativeMatrixLoadNV): {
                // NV: type, result, pointer, stride, column-major[, memory access...]
                EMBER_CHECK(in.count >= 6, Format, "coop_nv_to_khr: a load of ", in.count,
                            " words");
                if (nv2) {
                    // The rows x columns block at the pointer, rows `stride` apart, as a tensor
                    // load: a fresh layout of those dimensions and strides (stride, 1); the
                    // matrix operand, which only a clipped view would keep, is undefined.
                    EMBER_CHECK(layout_of(w[5]) == kRowMajor && dims.count(w[1]), Format,
                                "coop_nv_to_khr: a tensor load must be a row-major load of a "
                                "matrix type");
                    const auto [rows, cols] = dims[w[1]];
                    const u32 undef = bound++, l0 = bound++, l1 = bound++, l2 = bound++;
                    out.insert(out.end(), {head(3, op(spv::OpUndef)), w[1], undef,
                                           head(3, kOpCreateTensorLayoutNv), layout_type, l0,
                                           head(6, kOpTensorLayoutSetDimensionNv), layout_type, l1,
                                           l0, rows, cols, head(6, kOpTensorLayoutSetStrideNv),
                                           layout_type, l2, l1, w[4], c1});
                    // Memory operands as the load's (None where it has none), then no tensor
                    // addressing operands.
                    const auto access = all.subspan(6);
                    out.insert(out.end(),
                               {head(static_cast<u32>(8 + (access.empty() ? 0 : access.size() - 1)),
                                     kOpCoopLoadTensorNv),
                                w[1], w[2], w[3], undef, l2});
                    if (access.empty()) out.push_back(0);
                    out.insert(out.end(), access.begin(), access.end());
                    out.push_back(0);
                    continue;
                }
                out.insert(out.end(), {head(in.count, kOpCoopLoadKhr), w[1], w[2], w[3],
                                       constant(layout_of(w[5])), w[4]});
                out.insert(out.end(), all.begin() + 6, all.end());
                continue;
            }
            case op(spv::OpCooperativeMatrixStoreNV): {
                // NV: pointer, object, stride, column-major[, memory access...]
                EMBER_CHECK(in.count >= 5, Format, "coop_nv_to_khr: a store of ", in.count,
                            " words");
                out.insert(out.end(), {head(in.count, kOpCoopStoreKhr), w[1], w[2],
                                       constant(layout_of(w[4])), w[3]});
                out.insert(out.end(), all.begin() + 5, all.end());
                continue;
            }
            case op(spv::OpCooperativeMatrixMulAddNV):
                out.push_back(head(in.count, kOpCoopMulAddKhr));
                out.insert(out.end(), all.begin() + 1, all.end());
                continue;
            case op(spv::OpCooperativeMatrixLengthNV):
                out.push_back(head(in.count, kOpCoopLengthKhr));
                out.insert(out.end(), all.begin() + 1, all.end());
                continue;
            default:
                break;
        }
        out.insert(out.end(), all.begin(), all.end());
    }
    out[3] = bound;
    if (nv2) out[1] = std::max<u32>(out[1], 0x00010600);  // tensor addressing is SPIR-V 1.6
    return out;
}

}  // namespace ember::detail::vk
