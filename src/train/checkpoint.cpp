// The artifact directory's lock and the checkpoints' manifests.
#include "ember/train/checkpoint.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <map>
#include <mutex>
#include <set>

#include "ember/record/recorder.hpp"
#include "ember/record/untrusted.hpp"
#include "ember/tensor/error.hpp"

namespace ember::train {
namespace fs = std::filesystem;

struct ArtifactLock::State {
    fs::path dir;
    int fd = -1;
    ~State() {
        if (fd >= 0) ::close(fd);  // closing the last descriptor releases the flock
    }
};

namespace {

constexpr const char* kLockFile = ".lock";
constexpr const char* kKinds[] = {"model", "optim", "scheduler"};

// The locks this process holds, by canonical directory: flock() conflicts between two open
// file descriptions even in one process, so a second lock of the same directory shares the
// first.
std::mutex g_locks_mutex;
std::map<std::string, std::weak_ptr<ArtifactLock::State>>& held_locks() {
    static std::map<std::string, std::weak_ptr<ArtifactLock::State>> m;
    return m;
}

std::string shown(const fs::path& p) {
    return record::printable(p.string(), 4096);
}

fs::path manifest_path(const fs::path& dir, std::size_t epoch) {
    return dir / ("checkpoint-" + std::to_string(epoch) + ".json");
}

// "<prefix><digits><rest>" → the number, when `rest` is empty or starts with '.'.
std::optional<std::size_t> epoch_in(std::string_view name, std::string_view prefix) {
    if (!name.starts_with(prefix)) return std::nullopt;
    const char* first = name.data() + prefix.size();
    const char* last = name.data() + name.size();
    std::size_t n = 0;
    const auto [p, ec] = std::from_chars(first, last, n);
    if (ec != std::errc{} || p == first || (p != last && *p != '.')) return std::nullopt;
    return n;
}

// The epoch of a checkpoint file ("model-3.mpk.gz" → 3).
std::optional<std::size_t> record_epoch(std::string_view name) {
    for (const char* kind : kKinds)
        if (auto n = epoch_in(name, std::string(kind) + "-")) return n;
    return std::nullopt;
}

// A temporary of record::detail::write_bytes_atomic: ".<name>.tmp-<16 hex digits>".
bool is_temporary(std::string_view name) {
    const auto at = name.rfind(".tmp-");
    if (name.size() < 2 || name[0] != '.' || at == std::string_view::npos || at == 0) return false;
    const std::string_view tag = name.substr(at + 5);
    if (tag.size() != 16) return false;
    for (char c : tag)
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
    return true;
}

// The files and sizes a manifest lists; nullopt when it is missing or unreadable.
std::optional<std::map<std::string, std::uint64_t>> read_manifest(const fs::path& file,
                                                                  std::size_t epoch) {
    std::error_code ec;
    if (!fs::is_regular_file(file, ec)) return std::nullopt;
    try {
        const record::Value v = record::detail::read_file(file, record::detail::Format::PrettyJson);
        const record::Value* e = v.find("epoch");
        const record::Value* files = v.find("files");
        if (!e || !e->is<std::int64_t>() || e->as<std::int64_t>() != std::int64_t(epoch) ||
            !files || !files->is<record::Map>())
            return std::nullopt;
        std::map<std::string, std::uint64_t> out;
        for (const auto& [name, size] : files->as<record::Map>()) {
            if (!size.is<std::int64_t>() || size.as<std::int64_t>() < 0) return std::nullopt;
            out.emplace(name, std::uint64_t(size.as<std::int64_t>()));
        }
        return out;
    } catch (const Error&) {
        return std::nullopt;
    }
}

// Why checkpoint `epoch` is not complete, or "" when it is (its manifest present, every file
// it lists of the size it gives).
std::string incomplete(const fs::path& dir, std::size_t epoch,
                       const std::vector<fs::path>* expected) {
    const fs::path manifest = manifest_path(dir, epoch);
    const auto files = read_manifest(manifest, epoch);
    if (!files) return "its manifest '" + shown(manifest) + "' is missing or unreadable";
    for (const auto& [name, size] : *files) {
        std::error_code ec;
        const auto actual = fs::file_size(dir / name, ec);
        if (ec) return "'" + shown(dir / name) + "', listed in its manifest, is missing";
        if (actual != size)
            return "'" + shown(dir / name) + "' has " + std::to_string(actual) +
                   " bytes where its manifest says " + std::to_string(size);
    }
    if (expected) {
        for (const fs::path& f : *expected)
            if (!files->count(f.filename().string()))
                return "its manifest does not list '" + shown(f.filename()) +
                       "' (written with another recorder?)";
    }
    return {};
}

bool has_manifests(const fs::path& dir) {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir, ec))
        if (epoch_in(e.path().filename().string(), "checkpoint-")) return true;
    return false;
}

}  // namespace

ArtifactLock::ArtifactLock(const fs::path& dir) {
    std::error_code ec;
    fs::create_directories(dir, ec);
    EMBER_CHECK(!ec, Argument, "artifact directory '", shown(dir),
                "' cannot be created: ", ec.message());
    const fs::path canonical = fs::weakly_canonical(dir, ec);
    const std::string key = (ec ? dir : canonical).string();
    std::lock_guard guard(g_locks_mutex);
    if (auto held = held_locks()[key].lock()) {
        state_ = std::move(held);
        return;
    }
    auto state = std::make_shared<State>();
    state->dir = dir;
    const fs::path file = dir / kLockFile;
    state->fd = ::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (state->fd < 0)
        EMBER_FAIL(Generic, "artifact directory '", shown(dir), "': cannot open its lock file '",
                   shown(file), "': ", std::strerror(errno));
    if (::flock(state->fd, LOCK_EX | LOCK_NB) != 0) {
        const int err = errno;
        if (err != EWOULDBLOCK)
            EMBER_FAIL(Generic, "artifact directory '", shown(dir), "': cannot lock '", shown(file),
                       "': ", std::strerror(err));
        char buf[32] = {};
        const ssize_t n = ::pread(state->fd, buf, sizeof buf - 1, 0);
        std::string holder(buf, n > 0 ? std::size_t(n) : 0);
        while (!holder.empty() && (holder.back() == '\n' || holder.back() == ' '))
            holder.pop_back();
        EMBER_FAIL(Argument, "artifact directory '", shown(dir),
                   "' is in use by another run (process ",
                   holder.empty() ? std::string("?") : record::printable(holder, 20),
                   " holds its lock file '", shown(file),
                   "'): use another directory, or wait for that run to end");
    }
    const std::string pid = std::to_string(::getpid()) + "\n";
    if (::ftruncate(state->fd, 0) == 0) {
        const ssize_t n = ::pwrite(state->fd, pid.data(), pid.size(), 0);
        (void)n;  // the pid only improves the message a second run prints
    }
    held_locks()[key] = state;
    state_ = std::move(state);
}

const fs::path& ArtifactLock::dir() const {
    return state_->dir;
}

std::optional<std::size_t> latest_checkpoint(const fs::path& artifact_dir) {
    const fs::path dir = artifact_dir / "checkpoint";
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) return std::nullopt;
    std::set<std::size_t> manifests;
    std::map<std::size_t, std::set<std::string>> legacy;  // epoch → kinds present
    for (const auto& e : fs::directory_iterator(dir, ec)) {
        const std::string name = e.path().filename().string();
        if (auto n = epoch_in(name, "checkpoint-")) manifests.insert(*n);
        for (const char* kind : kKinds)
            if (auto n = epoch_in(name, std::string(kind) + "-")) legacy[*n].insert(kind);
    }
    if (!manifests.empty()) {
        for (auto it = manifests.rbegin(); it != manifests.rend(); ++it)
            if (incomplete(dir, *it, nullptr).empty()) return *it;
        return std::nullopt;
    }
    // Written before manifests: each file was atomic, so all three present is complete.
    for (auto it = legacy.rbegin(); it != legacy.rend(); ++it)
        if (it->second.size() == std::size(kKinds)) return it->first;
    return std::nullopt;
}

namespace detail {

void sync_directory(const fs::path& dir) {
    const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return;  // nothing to sync on a file system that cannot open directories
    const int rc = ::fsync(fd);
    const int err = errno;
    ::close(fd);
    // EINVAL: the file system does not sync directories (nothing to gain); anything else means
    // the renames may not be on disk.
    EMBER_CHECK(rc == 0 || err == EINVAL, Generic, "cannot sync directory '", shown(dir),
                "': ", std::strerror(err));
}

void commit_checkpoint(const fs::path& dir, std::size_t epoch, const std::vector<fs::path>& files) {
    record::Map listed;
    for (const fs::path& f : files) {
        std::error_code ec;
        const auto size = fs::file_size(f, ec);
        EMBER_CHECK(!ec, Argument, "checkpoint ", epoch, ": '", shown(f),
                    "' was not written: ", ec.message());
        listed.emplace_back(f.filename().string(), record::Value(std::int64_t(size)));
    }
    record::Map manifest;
    manifest.emplace_back("epoch", record::Value(std::int64_t(epoch)));
    manifest.emplace_back("files", record::Value(std::move(listed)));
    // The records' renames are on disk before the manifest that vouches for them.
    sync_directory(dir);
    record::detail::write_file(record::Value(std::move(manifest)), manifest_path(dir, epoch),
                               record::detail::Format::PrettyJson,
                               record::FullPrecisionSettings::value);
    sync_directory(dir);
}

void remove_checkpoint(const fs::path& dir, std::size_t epoch, const std::vector<fs::path>& files) {
    std::error_code ec;
    fs::remove(manifest_path(dir, epoch), ec);
    sync_directory(dir);  // incomplete on disk before any of its files goes
    for (const fs::path& f : files) fs::remove(f, ec);
}

void check_checkpoint(const fs::path& dir, std::size_t epoch, const std::vector<fs::path>& files) {
    std::error_code ec;
    if (!has_manifests(dir)) {
        // Written before manifests: complete when every file is there.
        for (const fs::path& f : files)
            EMBER_CHECK(fs::exists(f, ec), Format, "Learner::fit: cannot resume from checkpoint ",
                        epoch, ": '", shown(f), "' does not exist");
        return;
    }
    const std::string why = incomplete(dir, epoch, &files);
    EMBER_CHECK(why.empty(), Format, "Learner::fit: cannot resume from checkpoint ", epoch,
                ": it is incomplete (", why, ")", [&] {
                    const auto latest = latest_checkpoint(dir.parent_path());
                    return latest ? "; the newest complete checkpoint is " + std::to_string(*latest)
                                  : std::string("; there is no complete checkpoint");
                }());
}

std::size_t clean_artifacts(const fs::path& artifact_dir) {
    std::error_code ec;
    if (!fs::is_directory(artifact_dir, ec)) return 0;
    std::vector<fs::path> doomed;
    // Temporaries of interrupted atomic writes, anywhere in the directory (records, metric
    // logs, the final model).
    for (auto it = fs::recursive_directory_iterator(artifact_dir, ec);
         !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
        if (is_temporary(it->path().filename().string()) && it->is_regular_file(ec))
            doomed.push_back(it->path());
    }
    // Files of checkpoints without a manifest: a run killed while writing them, or while
    // deleting an old checkpoint.
    const fs::path dir = artifact_dir / "checkpoint";
    if (fs::is_directory(dir, ec) && has_manifests(dir)) {
        for (const auto& e : fs::directory_iterator(dir, ec)) {
            const std::string name = e.path().filename().string();
            if (auto n = record_epoch(name);
                n && !is_temporary(name) && !incomplete(dir, *n, nullptr).empty())
                doomed.push_back(e.path());
        }
    }
    std::size_t removed = 0;
    for (const fs::path& p : doomed) removed += fs::remove(p, ec) ? 1 : 0;
    if (removed && fs::is_directory(dir, ec)) sync_directory(dir);
    return removed;
}

}  // namespace detail
}  // namespace ember::train
