#!/usr/bin/env bash
# The web classifier's figures (issue 13), written to the "web" section of RESULTS.md: the size
# of the WebAssembly module, page load to first prediction and the time per inference in
# headless Chromium, beside the time per inference of the native build of the same code, in one
# run. Three alternating rounds; the medians are reported.
#
#   bash benchmarks/web.sh [BUILD]     BUILD: the native build directory (default build/)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$root/build}"
work="$build/web-classifier"
run="$root/examples/web-classifier/run.sh"
out="$work/bench"
rm -rf "$out" && mkdir -p "$out"

cmake --build "$build" --target mnist web-classifier-native >/dev/null
[[ -f "$work/data/model.bin" ]] || bash "$run" model "$build/examples/mnist" "$work"
bash "$run" build "$work" >/dev/null
for round in 1 2 3; do
  "$build/examples/web-classifier-native" "$work/data" --repeat 50 | tee "$out/native-$round.txt"
  EMBER_WEB_ROUNDS=50 bash "$run" e2e "$work" | tail -1
  cp "$work/e2e/figures.json" "$out/web-$round.json"
done

python3 - "$out" "$root" <<'PY' | python3 "$root/benchmarks/results_section.py" "$root/benchmarks/RESULTS.md" web
import glob, gzip, json, os, re, statistics, subprocess, sys, datetime
out, root = sys.argv[1:]
web = [json.load(open(f)) for f in sorted(glob.glob(f"{out}/web-*.json"))]
native = [float(re.search(r"native: ([0-9.]+) ms", open(f).read()).group(1))
          for f in sorted(glob.glob(f"{out}/native-*.txt"))]
med = lambda k: statistics.median(w[k] for w in web)
site = os.path.join(os.path.dirname(out), "wasm", "site")
wasm_gz = len(gzip.compress(open(os.path.join(site, "ember.wasm"), "rb").read(), 9))
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
commit = subprocess.run(["git", "-C", root, "rev-parse", "--short", "HEAD"], capture_output=True,
                        text=True).stdout.strip()
when = datetime.datetime.utcnow().strftime("%Y-%m-%d %H:%M UTC")
w, n = med("ms_per_inference"), statistics.median(native)
print(f"""<!-- web:begin -->
## The web classifier in Chromium (issue 13)

`benchmarks/web.sh`, {when}, commit {commit}, {cpu} ({os.cpu_count()} cores), Chromium
{web[0]['chromium']} headless; the guide CNN trained one epoch; medians of {len(web)} alternating
rounds (each: every one of 32 test images 50 times, after a warm-up pass).

| figure | value |
| --- | ---: |
| `ember.wasm` (Release, `-O3 -msimd128`) | {web[0]['wasm_bytes']:,} B ({wasm_gz:,} B gzipped) |
| `ember.js` (Emscripten's loader) | {web[0]['js_bytes']:,} B |
| `model.bin` (Bin record, f32) | {web[0]['model_bytes']:,} B |
| page load to first prediction | {med('load_to_first_prediction_ms'):.0f} ms (model fetched and loaded: {med('model_load_ms'):.0f} ms) |
| time per inference, WebAssembly in Chromium (one thread, no BLAS) | {w:.3f} ms |
| time per inference, native build of the same code (OpenBLAS, thread pool) | {n:.3f} ms |
| WebAssembly / native | {w / n:.1f}× |
| predictions equal to the native build's | clicked {web[0]['clicked_agree']}, uploaded {web[0]['upload_agree']} |
<!-- web:end -->""")
PY
echo "benchmarks/web.sh: RESULTS.md updated"
