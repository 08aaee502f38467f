#pragma once
// The artifact directory's lock and the Learner's checkpoints (src/train/checkpoint.cpp).
//
// A checkpoint is the model, optimizer and scheduler records of an epoch plus a manifest,
// checkpoint/checkpoint-N.json, written last: it names the three files and their sizes, so a
// checkpoint is complete exactly when its manifest exists and the files match it. A run killed
// between the files leaves no manifest, and resuming takes the newest complete checkpoint.
// Every file is written under a temporary name, flushed, renamed, and the directory synced
// after the rename.
#include <cstddef>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "../export.hpp"

namespace ember::train {

/// An exclusive lock on an artifact directory, so that two runs cannot mix their files in it.
/// It is a flock() on `<dir>/.lock` (which holds the owner's pid, for messages): the kernel
/// releases it when the process exits or dies, so a crashed run never leaves the directory
/// locked. Locks of one process on one directory are shared (a program may lock the directory
/// before writing its config and then build a Learner, which locks it again); copies share it
/// too, and the lock is released with the last of them.
class EMBER_API ArtifactLock {
  public:
    /// Locks `dir`, creating it if needed. ArgumentError naming the directory (and the pid
    /// written by the holder) when another process holds it; Error when the lock file cannot be
    /// made.
    explicit ArtifactLock(const std::filesystem::path& dir);
    /// The directory locked.
    const std::filesystem::path& dir() const;

    struct State;  ///< the open lock file (internal)

  private:
    std::shared_ptr<State> state_;
};

/// The epoch of the newest complete checkpoint under `artifact_dir`/checkpoint (its manifest
/// present, its files of the sizes the manifest gives), or nullopt when there is none.
/// Directories written before manifests existed: the newest epoch with all three files.
EMBER_API std::optional<std::size_t> latest_checkpoint(const std::filesystem::path& artifact_dir);

namespace detail {

/// Writes the manifest of checkpoint `epoch` in `dir` (the checkpoint directory) naming
/// `files` (already written, in `dir`) and their sizes; after it the checkpoint is complete.
EMBER_API void commit_checkpoint(const std::filesystem::path& dir, std::size_t epoch,
                                 const std::vector<std::filesystem::path>& files);
/// Removes checkpoint `epoch`: its manifest first (so it is never complete with files
/// missing), then `files`.
EMBER_API void remove_checkpoint(const std::filesystem::path& dir, std::size_t epoch,
                                 const std::vector<std::filesystem::path>& files);
/// Throws FormatError naming what is missing unless checkpoint `epoch` in `dir` is complete
/// and made of `files`.
EMBER_API void check_checkpoint(const std::filesystem::path& dir, std::size_t epoch,
                                const std::vector<std::filesystem::path>& files);
/// Removes what killed runs leave in `artifact_dir`: temporary files of interrupted atomic
/// writes (anywhere below it), and under checkpoint/ the files of checkpoints that have no
/// manifest (when the directory has manifests at all). Call it with the directory locked.
/// Returns the number of files removed.
EMBER_API std::size_t clean_artifacts(const std::filesystem::path& artifact_dir);
/// fsync()s a directory, so that the renames in it are on disk.
void sync_directory(const std::filesystem::path& dir);

}  // namespace detail
}  // namespace ember::train
