// The dashboard's drawing primitives: key decoding, braille canvas, bars and text widths.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "ember/tensor/error.hpp"
#include "ember/train/detail/dashboard.hpp"

namespace ember::train::detail {

std::vector<Key> decode_keys(std::string& buffer, bool flush) {
    std::vector<Key> keys;
    std::size_t i = 0;
    while (i < buffer.size()) {
        const unsigned char c = static_cast<unsigned char>(buffer[i]);
        if (c != 0x1b) {
            switch (c) {
                case 'q':
                case 'Q':
                    keys.push_back(Key::Quit);
                    break;
                case 0x03:
                    keys.push_back(Key::CtrlC);
                    break;
                // vi keys, for terminals whose arrows arrive mangled (e.g. some multiplexers)
                case 'h':
                    keys.push_back(Key::Left);
                    break;
                case 'l':
                    keys.push_back(Key::Right);
                    break;
                case 'k':
                    keys.push_back(Key::Up);
                    break;
                case 'j':
                    keys.push_back(Key::Down);
                    break;
                default:
                    keys.push_back(Key::Other);
                    break;
            }
            ++i;
            continue;
        }
        if (i + 1 >= buffer.size()) {  // a lone ESC: the rest may still be on its way
            if (!flush) break;
            keys.push_back(Key::Other);
            ++i;
            continue;
        }
        const char kind = buffer[i + 1];
        std::size_t end = 0;  // one past the sequence's final byte, 0 while incomplete
        char final_byte = 0;
        if (kind == '[') {  // CSI: parameters and intermediates, then a final byte @..~
            for (std::size_t j = i + 2; j < buffer.size(); ++j) {
                const unsigned char b = static_cast<unsigned char>(buffer[j]);
                if (b >= 0x40 && b <= 0x7e) {
                    end = j + 1;
                    final_byte = static_cast<char>(b);
                    break;
                }
            }
        } else if (kind == 'O') {  // SS3: the arrows in the terminal's application mode
            if (i + 2 < buffer.size()) {
                end = i + 3;
                final_byte = buffer[i + 2];
            }
        } else {  // ESC then a key: Alt+key, which the dashboard ignores
            end = i + 2;
        }
        if (end == 0) {
            if (!flush) break;
            keys.push_back(Key::Other);
            i = buffer.size();
            continue;
        }
        switch (final_byte) {
            case 'A':
                keys.push_back(Key::Up);
                break;
            case 'B':
                keys.push_back(Key::Down);
                break;
            case 'C':
                keys.push_back(Key::Right);
                break;
            case 'D':
                keys.push_back(Key::Left);
                break;
            default:
                keys.push_back(Key::Other);
                break;
        }
        i = end;
    }
    buffer.erase(0, i);
    return keys;
}

BrailleCanvas::BrailleCanvas(int width, int height) : width_(width), height_(height) {
    EMBER_CHECK(width >= 0 && height >= 0, Argument, "BrailleCanvas: negative size ", width, "x",
                height);
    bits_.assign(static_cast<std::size_t>(width) * static_cast<std::size_t>(height), 0);
    owner_.assign(bits_.size(), -1);
}

void BrailleCanvas::set(int x, int y, int series) {
    if (x < 0 || y < 0 || x >= 2 * width_ || y >= 4 * height_) return;
    // Unicode's braille dots: 1-3 and 7 down the left column, 4-6 and 8 down the right one.
    static constexpr std::uint8_t kDots[2][4] = {{0x01, 0x02, 0x04, 0x40},
                                                 {0x08, 0x10, 0x20, 0x80}};
    const std::size_t k = index(x / 2, y / 4);
    bits_[k] = static_cast<std::uint8_t>(bits_[k] | kDots[x % 2][y % 4]);
    owner_[k] = series;
}

void BrailleCanvas::line(int x0, int y0, int x1, int y1, int series) {
    const int dx = std::abs(x1 - x0), sx = x0 < x1 ? 1 : -1;
    const int dy = -std::abs(y1 - y0), sy = y0 < y1 ? 1 : -1;
    int err = dx + dy;
    for (;;) {
        set(x0, y0, series);
        if (x0 == x1 && y0 == y1) break;
        const int e2 = 2 * err;
        if (e2 >= dy) err += dy, x0 += sx;
        if (e2 <= dx) err += dx, y0 += sy;
    }
}

std::string BrailleCanvas::row(int cy, const std::vector<std::string>& colors) const {
    std::string out;
    int current = -1;  // the colour in force, so runs of one series share one escape
    for (int cx = 0; cx < width_; ++cx) {
        const std::uint8_t b = bits(cx, cy);
        if (b == 0) {
            out.push_back(' ');
            continue;
        }
        const int who = owner(cx, cy);
        if (!colors.empty() && who != current && who >= 0 &&
            static_cast<std::size_t>(who) < colors.size()) {
            out += "\x1b[" + colors[static_cast<std::size_t>(who)] + "m";
            current = who;
        }
        // U+2800 + b in UTF-8: E2, A0 + (b >> 6), 80 + (b & 3F)
        out.push_back(static_cast<char>(0xe2));
        out.push_back(static_cast<char>(0xa0 + (b >> 6)));
        out.push_back(static_cast<char>(0x80 + (b & 0x3f)));
    }
    if (current >= 0) out += "\x1b[0m";
    return out;
}

void plot_series(BrailleCanvas& canvas, const std::vector<ChartPoint>& points,
                 const ChartRange& range, int series) {
    const int w = 2 * canvas.width() - 1, h = 4 * canvas.height() - 1;
    if (w < 0 || h < 0) return;
    const double xs = range.x_max > range.x_min ? w / (range.x_max - range.x_min) : 0.0;
    const double ys = range.y_max > range.y_min ? h / (range.y_max - range.y_min) : 0.0;
    auto dot = [&](const ChartPoint& p) {
        const double x = std::clamp((p.x - range.x_min) * xs, 0.0, double(w));
        const double y = std::clamp((range.y_max - p.y) * ys, 0.0, double(h));
        return std::pair<int, int>{int(std::lround(x)), int(std::lround(y))};
    };
    std::optional<std::pair<int, int>> prev;
    for (const ChartPoint& p : points) {
        if (!std::isfinite(p.y)) {  // a NaN loss breaks the line rather than the chart
            prev.reset();
            continue;
        }
        const auto d = dot(p);
        if (prev)
            canvas.line(prev->first, prev->second, d.first, d.second, series);
        else
            canvas.set(d.first, d.second, series);
        prev = d;
    }
}

std::pair<double, double> value_range(const std::vector<const std::vector<ChartPoint>*>& series) {
    double lo = INFINITY, hi = -INFINITY;
    for (const auto* s : series)
        for (const ChartPoint& p : *s)
            if (std::isfinite(p.y)) lo = std::min(lo, p.y), hi = std::max(hi, p.y);
    if (lo > hi) return {0.0, 1.0};
    if (lo == hi) {
        const double margin = lo == 0 ? 1.0 : std::abs(lo) * 0.1;
        return {lo - margin, hi + margin};
    }
    return {lo, hi};
}

std::string progress_bar(double fraction, int width) {
    if (width <= 0) return {};
    if (!(fraction > 0)) fraction = 0;  // NaN too
    fraction = std::min(fraction, 1.0);
    // The epsilon keeps 0.57 * 100 = 56.99999... from losing a whole cell to rounding.
    const double cells = fraction * width + 1e-9;
    const int full = std::min(width, static_cast<int>(cells));
    const int eighths = full < width ? static_cast<int>((cells - full) * 8) : 0;
    std::string out;
    for (int i = 0; i < full; ++i) out += "\u2588";
    int used = full;
    if (eighths > 0) {
        // U+258F is one eighth, U+2589 seven eighths: the code point falls as the block grows.
        const int cp = 0x2590 - eighths;
        out.push_back(static_cast<char>(0xe2));
        out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
        ++used;
    }
    out.append(static_cast<std::size_t>(width - used), ' ');
    return out;
}

std::string format_duration(double seconds) {
    const long s = std::isfinite(seconds) && seconds > 0 ? static_cast<long>(seconds) : 0;
    char buf[48];
    if (s < 60)
        std::snprintf(buf, sizeof buf, "%lds", s);
    else if (s < 3600)
        std::snprintf(buf, sizeof buf, "%ldm %02lds", s / 60, s % 60);
    else
        std::snprintf(buf, sizeof buf, "%ldh %02ldm", s / 3600, (s % 3600) / 60);
    return buf;
}

std::optional<double> eta_seconds(double elapsed, double fraction) {
    if (!(fraction > 0)) return std::nullopt;
    if (fraction >= 1) return 0.0;
    return elapsed * (1 - fraction) / fraction;
}

namespace {
// The length of the escape sequence at s[i] (an ESC), to skip it when measuring.
std::size_t escape_length(std::string_view s, std::size_t i) {
    if (i + 1 >= s.size()) return 1;
    if (s[i + 1] != '[') return 2;
    for (std::size_t j = i + 2; j < s.size(); ++j) {
        const unsigned char b = static_cast<unsigned char>(s[j]);
        if (b >= 0x40 && b <= 0x7e) return j + 1 - i;
    }
    return s.size() - i;
}
}  // namespace

std::size_t display_width(std::string_view s) {
    std::size_t w = 0;
    for (std::size_t i = 0; i < s.size();) {
        if (s[i] == '\x1b') {
            i += escape_length(s, i);
            continue;
        }
        if ((static_cast<unsigned char>(s[i]) & 0xc0) != 0x80) ++w;  // not a continuation byte
        ++i;
    }
    return w;
}

std::string fit_width(std::string_view s, std::size_t width) {
    std::string out;
    std::size_t w = 0, i = 0;
    bool escapes = false;
    while (i < s.size()) {
        if (s[i] == '\x1b') {
            const std::size_t n = escape_length(s, i);
            out.append(s.substr(i, n));
            escapes = true;
            i += n;
            continue;
        }
        const bool starts = (static_cast<unsigned char>(s[i]) & 0xc0) != 0x80;
        if (starts && w == width) break;
        if (starts) ++w;
        out.push_back(s[i++]);
    }
    if (i < s.size() && escapes) out += "\x1b[0m";  // a cut colour must not leak to the padding
    out.append(width - w, ' ');
    return out;
}

}  // namespace ember::train::detail
