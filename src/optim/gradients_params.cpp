// GradientsParams' map operations, compiled once here rather than in every file that trains a
// model (include/ember/optim/gradients_params.hpp).
#include "ember/optim/gradients_params.hpp"

namespace ember::optim {

GradientsParams::GradientsParams() = default;
GradientsParams::~GradientsParams() = default;
GradientsParams::GradientsParams(const GradientsParams&) = default;
GradientsParams::GradientsParams(GradientsParams&&) noexcept = default;
GradientsParams& GradientsParams::operator=(const GradientsParams&) = default;
GradientsParams& GradientsParams::operator=(GradientsParams&&) noexcept = default;

bool GradientsParams::contains(ParamId id) const {
    return map_.count(id.value) != 0;
}

std::size_t GradientsParams::len() const {
    return map_.size();
}

bool GradientsParams::is_empty() const {
    return map_.empty();
}

std::vector<ParamId> GradientsParams::ids() const {
    std::vector<ParamId> out;
    out.reserve(map_.size());
    for (const auto& [k, v] : map_) out.push_back(ParamId{k});
    return out;
}

const GradientsParams::Entry* GradientsParams::find(std::uint64_t id) const {
    auto it = map_.find(id);
    return it == map_.end() ? nullptr : &it->second;
}

void GradientsParams::erase(std::uint64_t id) {
    map_.erase(id);
}

void GradientsParams::put(std::uint64_t id, Entry entry) {
    map_.insert_or_assign(id, std::move(entry));
}

}  // namespace ember::optim
