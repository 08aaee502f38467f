#include "protobuf.hpp"

#include <ember/tensor/error.hpp>

#include <cstring>

namespace ember::onnx::pb {

Reader::Reader(std::span<const std::byte> bytes, std::string_view source, std::string_view message,
               std::size_t base, int depth)
    : bytes_(bytes), source_(source), message_(message), base_(base), depth_(depth) {
    if (depth > kMaxDepth)
        fail("messages nest more than " + std::to_string(kMaxDepth) + " deep");
}

void Reader::fail(std::string_view what) const {
    EMBER_FAIL(Format, source_, ": ", what, " (in ", message_, ", byte ", base_ + field_start_, ")");
}

std::uint64_t Reader::raw_varint() {
    std::uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (pos_ >= bytes_.size()) fail("truncated varint");
        const auto b = std::to_integer<std::uint8_t>(bytes_[pos_++]);
        if (shift == 63 && b > 1) fail("varint longer than 64 bits");
        v |= std::uint64_t(b & 0x7f) << shift;
        if (!(b & 0x80)) return v;
    }
    fail("varint longer than 10 bytes");
}

bool Reader::next() {
    if (!consumed_) skip();
    if (pos_ >= bytes_.size()) return false;
    field_start_ = pos_;
    const std::uint64_t key = raw_varint();
    const auto type = static_cast<std::uint8_t>(key & 7);
    if (type != 0 && type != 1 && type != 2 && type != 5)
        fail("wire type " + std::to_string(type) + " (groups and unknown types are not read)");
    if ((key >> 3) == 0 || (key >> 3) > 0x1fffffff) fail("field number out of range");
    field_ = static_cast<std::uint32_t>(key >> 3);
    type_ = static_cast<WireType>(type);
    consumed_ = false;
    return true;
}

void Reader::expect(WireType t, std::string_view what) const {
    if (type_ != t)
        fail("field " + std::to_string(field_) + " should be " + std::string(what) +
             " but has wire type " + std::to_string(int(type_)));
}

std::uint64_t Reader::varint() {
    expect(WireType::Varint, "a varint");
    consumed_ = true;
    return raw_varint();
}

float Reader::f32() {
    expect(WireType::Fixed32, "a fixed32");
    if (bytes_.size() - pos_ < 4) fail("truncated fixed32");
    float f;
    std::memcpy(&f, bytes_.data() + pos_, 4);
    pos_ += 4;
    consumed_ = true;
    return f;
}

double Reader::f64() {
    expect(WireType::Fixed64, "a fixed64");
    if (bytes_.size() - pos_ < 8) fail("truncated fixed64");
    double d;
    std::memcpy(&d, bytes_.data() + pos_, 8);
    pos_ += 8;
    consumed_ = true;
    return d;
}

std::span<const std::byte> Reader::bytes() {
    expect(WireType::Bytes, "length-delimited");
    const std::uint64_t n = raw_varint();
    if (n > bytes_.size() - pos_)
        fail("a length of " + std::to_string(n) + " bytes runs past the end (" +
             std::to_string(bytes_.size() - pos_) + " left)");
    auto out = bytes_.subspan(pos_, static_cast<std::size_t>(n));
    pos_ += static_cast<std::size_t>(n);
    consumed_ = true;
    return out;
}

std::string Reader::string() {
    const auto b = bytes();
    return {reinterpret_cast<const char*>(b.data()), b.size()};
}

Reader Reader::message(std::string_view message) {
    const auto b = bytes();
    return Reader(b, source_, message, base_ + pos_ - b.size(), depth_ + 1);
}

void Reader::skip() {
    switch (type_) {
        case WireType::Varint: (void)varint(); break;
        case WireType::Fixed64: (void)f64(); break;
        case WireType::Fixed32: (void)f32(); break;
        case WireType::Bytes: (void)bytes(); break;
    }
}

void Reader::append_varints(std::vector<std::int64_t>& out) {
    if (type_ == WireType::Varint) {
        out.push_back(int64());
        return;
    }
    Reader packed(bytes(), source_, message_, base_ + pos_, depth_);
    while (packed.pos_ < packed.bytes_.size())
        out.push_back(static_cast<std::int64_t>(packed.raw_varint()));
}

void Reader::append_floats(std::vector<float>& out) {
    if (type_ == WireType::Fixed32) {
        out.push_back(f32());
        return;
    }
    const auto b = bytes();
    if (b.size() % 4) fail("packed floats of " + std::to_string(b.size()) + " bytes");
    if (b.empty()) return;  // (memcpy may not see the null data() of an empty vector)
    const std::size_t n0 = out.size();
    out.resize(n0 + b.size() / 4);
    std::memcpy(out.data() + n0, b.data(), b.size());
}

void Reader::append_doubles(std::vector<double>& out) {
    if (type_ == WireType::Fixed64) {
        out.push_back(f64());
        return;
    }
    const auto b = bytes();
    if (b.size() % 8) fail("packed doubles of " + std::to_string(b.size()) + " bytes");
    if (b.empty()) return;
    const std::size_t n0 = out.size();
    out.resize(n0 + b.size() / 8);
    std::memcpy(out.data() + n0, b.data(), b.size());
}

}  // namespace ember::onnx::pb
