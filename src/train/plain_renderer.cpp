// The plain line renderer.
#include <iostream>
#include <sstream>

#include <ember/tensor/error.hpp>
#include <ember/train/plain_renderer.hpp>

namespace ember::train {

PlainRenderer::PlainRenderer(std::ostream& os, double interval_s)
    : os_(&os), interval_(interval_s) {
    EMBER_CHECK(interval_s >= 0, Argument, "PlainRenderer: interval_s must be >= 0, got ",
                interval_s);
}

PlainRenderer::PlainRenderer() : PlainRenderer(std::cout) {}

void PlainRenderer::update(SplitState& s, const MetricEntry& e) {
    // One entry per metric and iteration: a repeated name starts the next iteration.
    for (auto& x : s.entries)
        if (x.name == e.name) {
            x = e;
            return;
        }
    s.entries.push_back(e);
}

void PlainRenderer::update_train(const MetricEntry& entry) {
    update(train_, entry);
}
void PlainRenderer::update_valid(const MetricEntry& entry) {
    update(valid_, entry);
}

void PlainRenderer::render(Split split, SplitState& s, const TrainingProgress& p) {
    s.progress = p;
    const auto now = std::chrono::steady_clock::now();
    const bool last = p.items_total != 0 && p.items_processed >= p.items_total;
    const double since = std::chrono::duration<double>(now - s.last).count();
    if (s.printed_once && !last && since < interval_) return;
    s.last = now;
    s.printed_once = true;
    std::ostringstream line;
    line << (split == Split::Train ? "[train]" : "[valid]") << " epoch " << p.epoch << '/'
         << p.epoch_total << " iteration " << p.iteration << " items " << p.items_processed;
    if (p.items_total) line << '/' << p.items_total;
    for (const auto& e : s.entries) line << " | " << e.name << ' ' << e.formatted;
    *os_ << line.str() << '\n' << std::flush;
}

void PlainRenderer::render_train(const TrainingProgress& progress) {
    render(Split::Train, train_, progress);
}
void PlainRenderer::render_valid(const TrainingProgress& progress) {
    render(Split::Valid, valid_, progress);
}

void PlainRenderer::on_epoch_end(Split split, std::size_t epoch) {
    SplitState& s = split == Split::Train ? train_ : valid_;
    std::ostringstream line;
    line << (split == Split::Train ? "[train]" : "[valid]") << " epoch " << epoch << " done";
    for (const auto& e : s.entries) {
        line << " | " << e.name << ' ';
        if (e.epoch_mean)
            line << "mean " << *e.epoch_mean;
        else
            line << e.formatted;
    }
    *os_ << line.str() << '\n' << std::flush;
    s.entries.clear();
    s.printed_once = false;
}

}  // namespace ember::train
