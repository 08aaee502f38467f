#pragma once
// NcclCollective: ranks are CUDA devices, joined by NCCL. Ops run on the CUDA backend's stream
// of the endpoint's device and return at once (ordered with the backend's kernels, as every op
// of the backend is). libnccl.so.2 is loaded when the first communicator is made (dlopen; set
// EMBER_NCCL_LIBRARY to use another file): programs link ember::nccl without linking NCCL, and a
// machine without it gets a DeviceError that says so.
//
// Available where ember was built with the CUDA backend and nccl.h (ember::nccl, EMBER_NCCL=1).
//
//   // one process, every GPU of the host (one thread per GPU):
//   auto ranks = ember::collective::NcclCollective::init_all({{0}, {1}});
//   // one process per GPU, on one host or several (launch commands: docs/multi-device.md):
//   auto comm = ember::collective::NcclCollective::from_env(ember::CudaDevice{local_rank});
#include <array>
#include <cstddef>
#include <memory>
#include <vector>

#include "../backend/cuda.hpp"
#include "../export.hpp"
#include "collective.hpp"

namespace ember::collective {

namespace detail {
struct NcclComm;
}

/// One rank of an NCCL communicator, bound to one CUDA device.
class EMBER_API NcclCollective final : public Collective {
  public:
    /// The bytes of an ncclUniqueId: made by rank 0, shared with every rank before init.
    using Id = std::array<std::byte, 128>;

    /// Whether libnccl can be loaded here (and a CUDA device exists).
    static bool is_available();
    /// A fresh id (ncclGetUniqueId). DeviceError when NCCL cannot be loaded.
    static Id make_id();

    /// This process's ranks first_rank .. first_rank + devices.size() - 1 of a communicator of
    /// `world_size` ranks, rank first_rank + i on devices[i] (ncclCommInitRank for each, in
    /// one NCCL group). Every process of the group calls it with the same id and world size.
    /// ArgumentError for an empty device list or ranks beyond the world size; DeviceError
    /// naming the NCCL call when it fails.
    static std::vector<std::unique_ptr<NcclCollective>> init_local(
        const Id& id, std::size_t world_size, std::size_t first_rank,
        const std::vector<CudaDevice>& devices);
    /// Rank `rank` of `world_size`, on `device` (one process or thread per rank).
    static std::unique_ptr<NcclCollective> init(const Id& id, std::size_t world_size,
                                                std::size_t rank, CudaDevice device);
    /// A communicator over `devices` in this process: rank i on devices[i].
    static std::vector<std::unique_ptr<NcclCollective>> init_all(
        const std::vector<CudaDevice>& devices);
    /// This process's rank of a multi-process group on `device`. The place comes from
    /// EMBER_WORLD_SIZE and EMBER_RANK; the id from EMBER_NCCL_ID (hex, set by the launcher),
    /// else through the file EMBER_NCCL_ID_FILE (rank 0 writes it), else through a TCP
    /// rendezvous at EMBER_MASTER_ADDR (host:port; rank 0 listens). ArgumentError when none is
    /// set; waits at most EMBER_RENDEZVOUS_TIMEOUT seconds (default 300).
    static std::unique_ptr<NcclCollective> from_env(CudaDevice device);

    ~NcclCollective() override;

    std::size_t rank() const override { return rank_; }
    std::size_t world_size() const override { return world_; }
    std::string name() const override { return "nccl"; }
    /// CUDA memory of this endpoint's device only.
    bool accepts(Memory memory) const override { return memory == Memory::Cuda; }
    /// The device this rank runs on.
    CudaDevice device() const { return device_; }

    void all_reduce(const Buffer& buffer, ReduceOp op) override;
    /// On a stream of its own (highest priority) that starts where the backend's stream is;
    /// wait() makes the backend's stream wait for it, without blocking the host.
    std::unique_ptr<Work> all_reduce_async(const Buffer& buffer, ReduceOp op) override;
    void broadcast(const Buffer& buffer, std::size_t root) override;
    void all_gather(const Buffer& input, const Buffer& output) override;
    void reduce_scatter(const Buffer& input, const Buffer& output, ReduceOp op) override;
    /// An all-reduce of one value, waited for on the host.
    void barrier() override;
    /// ncclCommAbort: pending and later ops of this communicator fail instead of hanging.
    void abort(const std::string& reason) override;

  private:
    NcclCollective(std::unique_ptr<detail::NcclComm> comm, std::size_t rank, std::size_t world,
                   CudaDevice device);
    void check_buffer(const char* op, const Buffer& b) const;
    void after_async() const;

    std::unique_ptr<detail::NcclComm> comm_;
    std::size_t rank_, world_;
    CudaDevice device_;
};

}  // namespace ember::collective
