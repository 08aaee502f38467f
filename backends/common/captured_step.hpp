#pragma once
// The members of ember::detail::graph::CapturedStep (stacks/step_graph.hpp), written once for
// every GPU backend and instantiated in each backend's graph.cpp, where its Graph is complete.
// A backend's Graph provides:
//
//     std::string why_not;             // empty when replayable
//     std::size_t replays, nodes;      // replays so far; nodes of the recorded work
//     std::optional<double> lr;        // the learning rate set_learning_rate chose
//     std::vector<...> adam;           // the optimizer updates each replay rewrites
//     void launch(std::size_t run);    // queues run `run` (0: the run at capture)
//     std::size_t random_draws() const;
//     std::size_t pool_bytes() const;
//     Device device_handle() const;
//     static void forbid_in_capture(const char* op);  // DeviceError inside a capture
#include <cmath>
#include <string>

#include "ember/stacks/step_graph.hpp"
#include "ember/tensor/error.hpp"

namespace ember::detail::graph {

template <typename Graph, typename Device>
CapturedStep<Graph, Device>::~CapturedStep() = default;

template <typename Graph, typename Device>
void CapturedStep<Graph, Device>::replay() {
    EMBER_CHECK(g_ != nullptr, Argument, "CapturedStep::replay: no step was captured");
    EMBER_CHECK(g_->why_not.empty(), Argument,
                "CapturedStep::replay: not replayable: ", g_->why_not);
    Graph::forbid_in_capture("CapturedStep::replay");
    g_->launch(++g_->replays);
}

template <typename Graph, typename Device>
void CapturedStep<Graph, Device>::set_learning_rate(double lr) {
    EMBER_CHECK(g_ != nullptr, Argument, "CapturedStep::set_learning_rate: no step was captured");
    EMBER_CHECK(lr >= 0 && std::isfinite(lr), Argument,
                "CapturedStep::set_learning_rate: the learning rate must be non-negative and "
                "finite, got ",
                lr);
    g_->lr = lr;
}

template <typename Graph, typename Device>
bool CapturedStep<Graph, Device>::replayable() const {
    return g_ != nullptr && g_->why_not.empty();
}

template <typename Graph, typename Device>
const std::string& CapturedStep<Graph, Device>::why_not() const {
    static const std::string none = "no step was captured";
    return g_ ? g_->why_not : none;
}

template <typename Graph, typename Device>
std::size_t CapturedStep<Graph, Device>::replays() const {
    return g_ ? g_->replays : 0;
}

template <typename Graph, typename Device>
std::size_t CapturedStep<Graph, Device>::num_nodes() const {
    return g_ ? g_->nodes : 0;
}

template <typename Graph, typename Device>
std::size_t CapturedStep<Graph, Device>::random_draws() const {
    return g_ ? g_->random_draws() : 0;
}

template <typename Graph, typename Device>
std::size_t CapturedStep<Graph, Device>::optimizer_updates() const {
    return g_ ? g_->adam.size() : 0;
}

template <typename Graph, typename Device>
std::size_t CapturedStep<Graph, Device>::pool_bytes() const {
    return g_ ? g_->pool_bytes() : 0;
}

template <typename Graph, typename Device>
Device CapturedStep<Graph, Device>::device() const {
    return g_ ? g_->device_handle() : Device{0};
}

}  // namespace ember::detail::graph
