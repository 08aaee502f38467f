#pragma once
// Internal to the PyTorch reader: a pickle virtual machine for what torch.save writes (protocol
// 2, and the protocol 3-5 opcodes a pickle_protocol argument may add). It never runs code: the
// only callables it knows are the few torch.save's files name (OrderedDict, the tensor and
// parameter rebuilders, torch.Size), and it rebuilds tensors as descriptions (storage, offset,
// sizes, strides) checked against their storage, materialised later. Anything else — an unknown
// opcode, global or class — is a FormatError naming it.
#include <cstddef>
#include <cstdint>
#include <deque>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ember/tensor/dtype.hpp"
#include "error.hpp"

namespace ember::record::detail::pt {

struct Object;
/// Objects live in the Heap and refer to each other by pointer: a hostile pickle may build
/// cycles or very deep nests, which shared ownership would leak or destroy recursively.
using Ref = Object*;

/// What an object is.
enum class Kind : std::uint8_t {
    None,     ///< Python's None
    Bool,     ///< `b`
    Int,      ///< `i`
    Float,    ///< `f`
    Str,      ///< `s` (UTF-8)
    Bytes,    ///< `s` (raw)
    Tuple,    ///< `items`
    List,     ///< `items`
    Set,      ///< `items` (sets and frozensets)
    Dict,     ///< `dict` (dict and OrderedDict, in insertion order)
    Global,   ///< a class or function named by `s` ("module.name"), from the known list
    Storage,  ///< `storage`: a torch storage, its bytes in the archive
    Tensor,   ///< `tensor`: a view of a storage
};

/// A storage named by a persistent id ('storage', class, key, location, numel).
struct StorageInfo {
    DType dtype = DType::U8;  ///< element type (UntypedStorage: bytes)
    std::string key;          ///< the entry under <archive>/data/
    std::uint64_t numel = 0;  ///< elements
};

/// A tensor as torch._utils._rebuild_tensor_v2 describes it: a strided view of a storage,
/// already checked to stay inside it.
struct TensorInfo {
    Ref storage = nullptr;               ///< a Kind::Storage object
    std::uint64_t offset = 0;            ///< first element, in elements
    std::vector<std::uint64_t> sizes;    ///< the shape
    std::vector<std::uint64_t> strides;  ///< in elements, non-negative
};

/// One pickled value.
struct Object {
    Kind kind = Kind::None;                 ///< which of the fields below hold the value
    bool b = false;                         ///< Bool
    std::int64_t i = 0;                     ///< Int
    double f = 0;                           ///< Float
    std::string s;                          ///< Str, Bytes, Global
    std::vector<Ref> items;                 ///< Tuple, List, Set
    std::vector<std::pair<Ref, Ref>> dict;  ///< Dict
    StorageInfo storage;                    ///< Storage
    TensorInfo tensor;                      ///< Tensor
};

/// Owns every object of one unpickling.
class Heap {
  public:
    /// A new object of `kind`.
    Ref make(Kind kind) {
        objects_.emplace_back();
        objects_.back().kind = kind;
        return &objects_.back();
    }

  private:
    std::deque<Object> objects_;  // a deque never moves what it holds
};

/// Runs the pickle program `bytes` (the archive entry `entry`, named in errors) and returns the
/// object it leaves; errors go through `src`.
Ref unpickle(std::span<const std::byte> bytes, std::string_view entry, Heap& heap,
             const Source& src);

/// "dict", "tensor", "int", ... for messages.
std::string_view kind_name(Kind kind);

}  // namespace ember::record::detail::pt
