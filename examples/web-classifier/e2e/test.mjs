// End-to-end test of the web classifier: serves the site on localhost, drives the page in
// headless Chromium with Playwright and checks that it predicts, for Fashion-MNIST test images,
// exactly the classes the native build predicted (expected.bin, from `mnist export`), whether
// the image is picked from the page's test images or uploaded as a PNG file; that drawing gives
// a prediction; and measures page load to first prediction and the time per inference.
//
//   node e2e/test.mjs SITE OUT      SITE: the built site with model.bin, images.bin and
//                                   expected.bin; OUT: where screenshot.png (a test image),
//                                   drawn.png (the stroke) and figures.json go
//
// Chromium: $CHROMIUM, else /usr/bin/chromium (Debian's package).
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import zlib from 'node:zlib';
import {chromium} from 'playwright-core';

const [site, out] = process.argv.slice(2);
if (!site || !out) {
  console.error('usage: node e2e/test.mjs SITE OUT');
  process.exit(2);
}
fs.mkdirSync(out, {recursive: true});
const PIXELS = 28 * 28;
const images = fs.readFileSync(path.join(site, 'images.bin'));
const expected = fs.readFileSync(path.join(site, 'expected.bin'));
const shown = Math.min(32, expected.length);  // the page shows at most 32 test images
let failures = 0;
function check(ok, what) {
  if (!ok) {
    failures += 1;
    console.log(`FAIL: ${what}`);
  }
}

// ---- a static file server on an ephemeral port -------------------------------------------------
const types = {'.html': 'text/html', '.js': 'text/javascript', '.css': 'text/css',
               '.wasm': 'application/wasm', '.bin': 'application/octet-stream'};
const server = http.createServer((req, res) => {
  const name = decodeURIComponent(new URL(req.url, 'http://x').pathname);
  const file = path.join(site, name === '/' ? 'index.html' : name);
  if (!file.startsWith(path.resolve(site)) || !fs.existsSync(file)) {
    res.writeHead(404);
    res.end();
    return;
  }
  res.writeHead(200, {'Content-Type': types[path.extname(file)] || 'application/octet-stream',
                      'Cache-Control': 'no-store'});
  fs.createReadStream(file).pipe(res);
});
await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
const url = `http://127.0.0.1:${server.address().port}/`;

// ---- a grayscale PNG of one test image, for the upload ---------------------------------------
const crcTable = Array.from({length: 256}, (_, n) => {
  let c = n;
  for (let k = 0; k < 8; ++k) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
  return c >>> 0;
});
function crc32(buf) {
  let c = 0xffffffff;
  for (const b of buf) c = crcTable[(c ^ b) & 0xff] ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}
function chunk(type, data) {
  const head = Buffer.alloc(8);
  head.writeUInt32BE(data.length, 0);
  head.write(type, 4, 'ascii');
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(Buffer.concat([head.subarray(4), data])));
  return Buffer.concat([head, data, crc]);
}
function grayPng(pixels, side) {
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(side, 0);
  ihdr.writeUInt32BE(side, 4);
  ihdr.set([8, 0, 0, 0, 0], 8);  // 8-bit gray, no interlace
  const rows = Buffer.alloc(side * (side + 1));
  for (let y = 0; y < side; ++y) pixels.copy(rows, y * (side + 1) + 1, y * side, (y + 1) * side);
  return Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
                        chunk('IHDR', ihdr), chunk('IDAT', zlib.deflateSync(rows)),
                        chunk('IEND', Buffer.alloc(0))]);
}

// ---- the browser -------------------------------------------------------------------------------
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
         '--disable-background-networking', '--disable-component-update', '--disable-sync',
         '--disable-default-apps', '--disable-extensions'],
});
const figures = {};
try {
  const page = await browser.newPage({viewport: {width: 900, height: 760}});
  const errors = [];
  page.on('pageerror', (e) => errors.push(e.message));
  page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });

  // Page load to first prediction: the page classifies its first test image once the model is
  // in; firstPredictionMs is measured from the start of navigation.
  await page.goto(url);
  await page.waitForFunction(() => window.ember && window.ember.stats.firstPredictionMs !== null,
                             null, {timeout: 30000});
  const stats = await page.evaluate(() => window.ember.stats);
  figures.load_to_first_prediction_ms = stats.firstPredictionMs;
  figures.model_load_ms = stats.loadMs;
  figures.model_bytes = stats.modelBytes;
  figures.wasm_bytes = fs.statSync(path.join(site, 'ember.wasm')).size;
  figures.js_bytes = fs.statSync(path.join(site, 'ember.js')).size;

  // The test images, clicked one by one.
  const prediction = () => page.$eval('#prediction', (e) => Number(e.dataset.class));
  let agree = 0;
  for (let i = 0; i < shown; ++i) {
    await page.click(`.samples canvas[data-index="${i}"]`);
    const got = await prediction();
    agree += got === expected[i];
    check(got === expected[i], `test image ${i}: page predicts ${got}, native ${expected[i]}`);
    const total = await page.$$eval('#bars .pct', (es) =>
      es.reduce((s, e) => s + parseFloat(e.textContent), 0));
    check(Math.abs(total - 100) < 0.6, `test image ${i}: the bars add up to ${total}%`);
  }
  figures.clicked_agree = `${agree}/${shown}`;
  console.log(`clicked test images: ${agree} of ${shown} predictions equal the native build's`);

  // The same images uploaded as PNG files (the upload path: decode, fit, maybe invert).
  let uploads = 0, uploadAgree = 0;
  for (const i of [0, 7, 13, 21, 31].filter((k) => k < expected.length)) {
    const file = path.join(out, `upload-${i}.png`);
    fs.writeFileSync(file, grayPng(images.subarray(i * PIXELS, (i + 1) * PIXELS), 28));
    await page.$eval('#prediction', (e) => { e.dataset.class = ''; });
    await page.setInputFiles('#upload', file);
    await page.waitForFunction(() => document.querySelector('#prediction').dataset.class !== '');
    const got = await prediction();
    uploads += 1;
    uploadAgree += got === expected[i];
    check(got === expected[i], `uploaded image ${i}: page predicts ${got}, native ${expected[i]}`);
  }
  figures.upload_agree = `${uploadAgree}/${uploads}`;
  console.log(`uploaded PNGs: ${uploadAgree} of ${uploads} predictions equal the native build's`);

  // Drawing: a stroke on the pad gives some prediction.
  await page.click('#clear');
  await page.$eval('#prediction', (e) => { e.dataset.class = ''; });
  const pad = await page.$('#pad');
  const box = await pad.boundingBox();
  await page.mouse.move(box.x + 110, box.y + 40);
  await page.mouse.down();
  for (let k = 1; k <= 20; ++k) await page.mouse.move(box.x + 110, box.y + 40 + 10 * k);
  await page.mouse.up();
  const drawn = await page.$eval('#prediction', (e) => e.dataset.class);
  await page.screenshot({path: path.join(out, 'drawn.png')});
  check(drawn !== '', 'drawing on the pad gives a prediction');
  console.log(`drawn stroke: predicted ${drawn === '' ? 'nothing' : (await page.evaluate(
      (c) => window.ember.CLASSES[c], Number(drawn)))}`);

  // Time per inference: every shown test image, 10 rounds, after a warm-up round.
  figures.ms_per_inference = await page.evaluate(({shown, rounds}) => {
    const all = Array.from(document.querySelectorAll('.samples canvas')).slice(0, shown);
    const bytes = [];
    return fetch('images.bin').then((r) => r.arrayBuffer()).then((buf) => {
      for (let i = 0; i < shown; ++i) bytes.push(new Uint8Array(buf, i * 784, 784));
      for (const b of bytes) window.ember.classify(b);
      const start = performance.now();
      for (let r = 0; r < rounds; ++r) for (const b of bytes) window.ember.classify(b);
      return (performance.now() - start) / (rounds * bytes.length);
    });
  }, {shown, rounds: Number(process.env.EMBER_WEB_ROUNDS || 10)});

  // The screenshot: a test image and its bars.
  await page.click('.samples canvas[data-index="1"]');
  await page.waitForTimeout(400);  // the bars' transition
  await page.screenshot({path: path.join(out, 'screenshot.png'), fullPage: true});
  check(errors.length === 0, `the page logged errors: ${errors.join(' | ')}`);
  figures.chromium = browser.version();
} finally {
  await browser.close();
  server.close();
}

fs.writeFileSync(path.join(out, 'figures.json'), JSON.stringify(figures, null, 2) + '\n');
console.log(JSON.stringify(figures));
if (failures) {
  console.log(`${failures} check(s) failed`);
  process.exit(1);
}
console.log('web classifier: all checks passed');
