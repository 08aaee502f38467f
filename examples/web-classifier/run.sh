#!/usr/bin/env bash
# The web classifier's steps, for people and for CTest (examples/CMakeLists.txt):
#
#   run.sh model MNIST WORK    train the guide CNN with the mnist example (one epoch) and
#                              export it with 100 test images to WORK/data
#   run.sh build WORK [DATA]   build the WebAssembly module with Emscripten into WORK/wasm and
#                              put the site together in WORK/wasm/site, with the model and test
#                              images of DATA (default WORK/data, as `mnist export` writes them)
#   run.sh native NATIVE WORK  run the native build of the same inference code (NATIVE: the
#                              web-classifier-native program) on WORK/data
#   run.sh e2e WORK            drive the page in headless Chromium (e2e/test.mjs); screenshot
#                              and figures in WORK/e2e
#   run.sh serve WORK [PORT]   serve the site on http://localhost:PORT (default 8000)
set -euo pipefail
src="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$src/../.." && pwd)"

case "${1:-}" in
  model)
    mnist="$2" work="$3"
    rm -rf "$work/train"
    "$mnist" train --model cnn --epochs 1 --workers 0 --plain --seed 7 \
      --artifact-dir "$work/train" | tail -1
    "$mnist" export --artifact-dir "$work/train" --out "$work/data" --count 100
    ;;
  build)
    work="$2" data="${3:-$2/data}"
    launcher=()
    command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
    # EMBER_WEB_OPT_FLAGS replaces Release's -O3 (compiles and the link's wasm-opt): CI
    # (scripts/test.sh) builds with -O1, which took 62 % of -O3's CPU time on the two largest
    # files; the test checks the page's answers, not its speed.
    cmake -S "$src" -B "$work/wasm" -G Ninja -DCMAKE_BUILD_TYPE=Release \
      "-DCMAKE_CXX_FLAGS_RELEASE=${EMBER_WEB_OPT_FLAGS:--O3} -DNDEBUG" \
      -DCMAKE_TOOLCHAIN_FILE="$root/cmake/emscripten.cmake" "${launcher[@]}" >/dev/null
    cmake --build "$work/wasm"
    for f in model.bin images.bin expected.bin; do
      cp "$data/$f" "$work/wasm/site/$f"
    done
    ls -l "$work/wasm/site"
    ;;
  native)
    native="$2" work="$3"
    "$native" "$work/data"
    ;;
  e2e)
    work="$2"
    if [[ ! -d "$src/node_modules/playwright-core" ]]; then
      (cd "$src" && npm ci --no-audit --no-fund --loglevel=error)
    fi
    node "$src/e2e/test.mjs" "$work/wasm/site" "$work/e2e"
    ;;
  serve)
    work="$2" port="${3:-8000}"
    echo "http://localhost:$port/"
    cd "$work/wasm/site" && exec python3 -m http.server "$port" --bind 127.0.0.1
    ;;
  *)
    sed -n '2,14p' "$0" >&2
    exit 2
    ;;
esac
