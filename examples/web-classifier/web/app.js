'use strict';
// The page: loads ember's WebAssembly module (createEmber, from ember.js) and the model
// (model.bin, the guide's CNN as `mnist export` writes it), turns what the user draws, uploads
// or picks into 28×28 pixels, and shows the class probabilities as bars.
//
// window.ember is for tests and the curious: ember.ready resolves when the model is loaded,
// ember.classify(pixels) runs one image (a Uint8Array of 784 pixels, 0..255, light on dark),
// ember.stats holds the figures the page reports.

const CLASSES = ['T-shirt/top', 'Trouser', 'Pullover', 'Dress', 'Coat',
                 'Sandal', 'Shirt', 'Sneaker', 'Bag', 'Ankle boot'];
const SIDE = 28;
const PIXELS = SIDE * SIDE;

const $ = (id) => document.getElementById(id);
const pad = $('pad');
const padCtx = pad.getContext('2d', {willReadFrequently: true});
const stats = {modelBytes: 0, loadMs: 0, firstPredictionMs: null, lastInferenceMs: null};
let wasm = null;          // the Emscripten module
let pixelsPtr = 0;        // 784 bytes in the wasm heap
let probsPtr = 0;         // 10 floats in the wasm heap

// ---- the model ---------------------------------------------------------------------------------

async function loadModel() {
  const start = performance.now();
  const [module, model] = await Promise.all([
    createEmber(),
    fetch('model.bin').then((r) => {
      if (!r.ok) throw new Error(`model.bin: HTTP ${r.status} (run \`mnist export\` first)`);
      return r.arrayBuffer();
    }),
  ]);
  const bytes = new Uint8Array(model);
  const at = module._malloc(bytes.length);
  module.HEAPU8.set(bytes, at);
  module._ember_load(at, bytes.length);
  module._free(at);
  pixelsPtr = module._malloc(PIXELS);
  probsPtr = module._malloc(4 * CLASSES.length);
  wasm = module;
  stats.modelBytes = bytes.length;
  stats.loadMs = performance.now() - start;
}

// Classifies 784 pixels; returns {cls, probs, ms}. The heap views are read after the call: a
// call may grow the heap, which replaces them.
function classify(pixels) {
  if (!wasm) throw new Error('the model is not loaded yet');
  if (pixels.length !== PIXELS) throw new Error(`classify: ${pixels.length} pixels, not ${PIXELS}`);
  wasm.HEAPU8.set(pixels, pixelsPtr);
  const start = performance.now();
  const cls = wasm._ember_classify(pixelsPtr, probsPtr);
  const ms = performance.now() - start;
  const probs = Array.from(wasm.HEAPF32.subarray(probsPtr >> 2, (probsPtr >> 2) + CLASSES.length));
  return {cls, probs, ms};
}

// ---- showing a result --------------------------------------------------------------------------

const bars = CLASSES.map((name) => {
  const li = document.createElement('li');
  li.innerHTML = '<span class="name"></span><span class="track"><span class="fill"></span></span>' +
                 '<span class="pct"></span>';
  li.querySelector('.name').textContent = name;
  $('bars').appendChild(li);
  return li;
});

function show(result) {
  const {cls, probs, ms} = result;
  probs.forEach((p, c) => {
    bars[c].classList.toggle('top', c === cls);
    bars[c].querySelector('.fill').style.width = `${(100 * p).toFixed(1)}%`;
    bars[c].querySelector('.pct').textContent = `${(100 * p).toFixed(1)}%`;
  });
  const prediction = $('prediction');
  prediction.dataset.class = String(cls);
  prediction.innerHTML = `${CLASSES[cls]} <small>${(100 * probs[cls]).toFixed(1)}%</small>`;
  stats.lastInferenceMs = ms;
  if (stats.firstPredictionMs === null) stats.firstPredictionMs = performance.now();
  $('timing').textContent = `Inference: ${ms.toFixed(2)} ms (WebAssembly, one thread)`;
}

function run(pixels) {
  try {
    show(classify(pixels));
  } catch (e) {
    fail(e);
  }
}

function fail(e) {
  const status = $('status');
  status.textContent = `Error: ${e.message || e}`;
  status.classList.add('error');
  console.error(e);
}

// ---- pixels from a picture ---------------------------------------------------------------------

// Gray levels of an RGBA image (integer weights, so that a gray pixel keeps its exact value).
function grayOf(image) {
  const out = new Uint8Array(image.width * image.height);
  for (let i = 0; i < out.length; ++i) {
    const [r, g, b] = [image.data[4 * i], image.data[4 * i + 1], image.data[4 * i + 2]];
    out[i] = Math.round((299 * r + 587 * g + 114 * b) / 1000);
  }
  return out;
}

// `source` (a canvas or an image) fitted into 28×28 on black, centred, keeping its proportions;
// `box` = [x, y, w, h] picks the part of it to use. A 28×28 source is copied pixel for pixel.
function toPixels(source, box) {
  const [x, y, w, h] = box;
  const scale = SIDE / Math.max(w, h);
  const [dw, dh] = [w * scale, h * scale];
  const small = document.createElement('canvas');
  small.width = small.height = SIDE;
  const ctx = small.getContext('2d', {willReadFrequently: true});
  ctx.fillStyle = '#000';
  ctx.fillRect(0, 0, SIDE, SIDE);
  ctx.imageSmoothingEnabled = true;
  ctx.imageSmoothingQuality = 'high';
  ctx.drawImage(source, x, y, w, h, (SIDE - dw) / 2, (SIDE - dh) / 2, dw, dh);
  return grayOf(ctx.getImageData(0, 0, SIDE, SIDE));
}

// The bounding square of what was drawn on the pad, with a margin (Fashion-MNIST's objects
// fill their frame), or null when the pad is empty.
function drawnBox() {
  const gray = grayOf(padCtx.getImageData(0, 0, pad.width, pad.height));
  let [x0, y0, x1, y1] = [pad.width, pad.height, -1, -1];
  for (let y = 0; y < pad.height; ++y) {
    for (let x = 0; x < pad.width; ++x) {
      if (gray[y * pad.width + x] > 16) {
        x0 = Math.min(x0, x); x1 = Math.max(x1, x);
        y0 = Math.min(y0, y); y1 = Math.max(y1, y);
      }
    }
  }
  if (x1 < 0) return null;
  const side = Math.max(x1 - x0, y1 - y0) * 1.1 + 8;
  const [cx, cy] = [(x0 + x1) / 2, (y0 + y1) / 2];
  return [cx - side / 2, cy - side / 2, side, side];
}

// Pixels of an uploaded picture. Photos of clothes are mostly dark on a light background, the
// opposite of Fashion-MNIST: when the border is light, the gray levels are inverted.
function uploadedPixels(image) {
  let pixels = toPixels(image, [0, 0, image.naturalWidth, image.naturalHeight]);
  let border = 0;
  for (let i = 0; i < SIDE; ++i) {
    border += pixels[i] + pixels[PIXELS - SIDE + i] + pixels[i * SIDE] + pixels[i * SIDE + SIDE - 1];
  }
  if (border / (4 * SIDE) > 127) pixels = pixels.map((v) => 255 - v);
  return pixels;
}

// Shows 28×28 pixels on a canvas, one block per pixel.
function paint(canvas, pixels) {
  const ctx = canvas.getContext('2d');
  const image = ctx.createImageData(SIDE, SIDE);
  pixels.forEach((v, i) => image.data.set([v, v, v, 255], 4 * i));
  const tmp = document.createElement('canvas');
  tmp.width = tmp.height = SIDE;
  tmp.getContext('2d').putImageData(image, 0, 0);
  ctx.imageSmoothingEnabled = false;
  ctx.clearRect(0, 0, canvas.width, canvas.height);
  ctx.drawImage(tmp, 0, 0, canvas.width, canvas.height);
}

// ---- input: drawing, uploads, test images ------------------------------------------------------

function clearPad() {
  padCtx.fillStyle = '#000';
  padCtx.fillRect(0, 0, pad.width, pad.height);
}

function selectSample(canvas) {
  document.querySelectorAll('.samples canvas').forEach((c) => c.classList.remove('selected'));
  if (canvas) canvas.classList.add('selected');
}

let drawing = false;
let pending = false;
function classifyPad() {
  const box = drawnBox();
  if (box && wasm) run(toPixels(pad, box));
}
pad.addEventListener('pointerdown', (e) => {
  drawing = true;
  pad.setPointerCapture(e.pointerId);
  selectSample(null);
  const r = pad.getBoundingClientRect();
  padCtx.beginPath();
  padCtx.moveTo((e.clientX - r.left) * pad.width / r.width, (e.clientY - r.top) * pad.height / r.height);
});
pad.addEventListener('pointermove', (e) => {
  if (!drawing) return;
  const r = pad.getBoundingClientRect();
  padCtx.lineTo((e.clientX - r.left) * pad.width / r.width, (e.clientY - r.top) * pad.height / r.height);
  padCtx.strokeStyle = '#fff';
  padCtx.lineWidth = 18;
  padCtx.lineCap = padCtx.lineJoin = 'round';
  padCtx.stroke();
  if (!pending) {  // at most one inference per frame while drawing
    pending = true;
    requestAnimationFrame(() => { pending = false; classifyPad(); });
  }
});
pad.addEventListener('pointerup', () => { drawing = false; classifyPad(); });

$('clear').addEventListener('click', () => { clearPad(); selectSample(null); });

$('upload').addEventListener('change', (e) => {
  const file = e.target.files[0];
  if (!file) return;
  const image = new Image();
  image.onload = () => {
    URL.revokeObjectURL(image.src);
    const pixels = uploadedPixels(image);
    selectSample(null);
    paint(pad, pixels);
    run(pixels);
  };
  image.onerror = () => fail(new Error(`${file.name} is not an image this browser can read`));
  image.src = URL.createObjectURL(file);
  e.target.value = '';  // picking the same file again is a new choice
});

// Test images, as `mnist export` writes them (images.bin: 784 raw pixels each). Optional.
async function loadSamples() {
  const r = await fetch('images.bin');
  if (!r.ok) return [];
  const bytes = new Uint8Array(await r.arrayBuffer());
  const samples = [];
  for (let i = 0; i + PIXELS <= bytes.length && samples.length < 32; i += PIXELS) {
    const pixels = bytes.slice(i, i + PIXELS);
    const c = document.createElement('canvas');
    c.width = c.height = SIDE;
    c.dataset.index = String(samples.length);
    c.title = `test image ${samples.length}`;
    paint(c, pixels);
    c.addEventListener('click', () => {
      selectSample(c);
      paint(pad, pixels);
      run(pixels);
    });
    $('samples').appendChild(c);
    samples.push(pixels);
  }
  return samples;
}

// ---- start -------------------------------------------------------------------------------------

clearPad();
const ready = (async () => {
  try {
    const [samples] = await Promise.all([loadSamples(), loadModel()]);
    $('status').textContent = `Model: ${(stats.modelBytes / 1024).toFixed(0)} KiB, loaded in ` +
                              `${stats.loadMs.toFixed(0)} ms.`;
    if (samples.length) $('samples').firstChild.click();  // a first prediction to look at
  } catch (e) {
    fail(e);
    throw e;
  }
})();

window.ember = {ready, classify, stats, CLASSES};
