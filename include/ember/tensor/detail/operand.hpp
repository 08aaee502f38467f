#pragma once
// How the tensor layer's op table (detail::KindOps) takes an operand whose primitive is P. By
// default a P by value: an lvalue tensor's operand is a copy of its primitive, which the op may
// consume. A backend whose primitive is a counted handle to another (ember::Dispatch) names a
// type that lends an lvalue's handle for the call instead, so that an operand the tensor keeps
// costs no count update (see DispatchTensor).

namespace ember::detail {

/// The type KindOps takes an operand of primitive P as (P, unless specialised).
template <typename P>
struct OperandOf {
    using type = P;
};

}  // namespace ember::detail
