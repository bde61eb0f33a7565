'use strict';
// Runs an ONNX model exported by pstrain in ONNX Runtime (npm
// onnxruntime-node, a runtime no one here wrote) and prints its outputs.
// An image classifier:
//
//   NODE_PATH=<node_modules with onnxruntime-node> \
//     node tests/onnx/ort_run.js MODEL.onnx IMAGES.f32 N H W C
//
// IMAGES.f32: N x H x W x C float32 little-endian pixels in [0, 1], fed as the
// graph input `images` [N, H, W, C]. Prints one line of JSON to stdout,
//   {"probabilities": [[...], ...], "classes": [...]}
// (every float32 exactly, as a JSON number) and nothing else.
//
// Any graph (a tabular model's dense and id-feature inputs):
//
//   node tests/onnx/ort_run.js MODEL.onnx INPUTS.json
//
// INPUTS.json: {"<input>": {"type": "float32" or "int64", "dims": [...],
// "data": [...] (row-major)}, ...}. Prints one line of JSON with every
// output, {"<output>": {"dims": [...], "data": [...]}, ...} (int64 as
// numbers).
//
// Exits 1 with the reason on stderr for a model or input it cannot run, 2 on
// bad usage.

const fs = require('fs');

function fail(message) {
  process.stderr.write(`ort_run.js: ${message}\n`);
  process.exit(1);
}

function loadOrt() {
  try {
    return require('onnxruntime-node');
  } catch (e) {
    fail(`cannot load onnxruntime-node (${e.message}); set NODE_PATH to the node_modules ` +
         'holding it (deploy/install-deps.sh puts it in .deps/node/node_modules)');
  }
}

async function createSession(ort, modelPath) {
  try {
    // Errors only: a warning on stderr would be mixed into the caller's output.
    return await ort.InferenceSession.create(modelPath, {logSeverityLevel: 3});
  } catch (e) {
    fail(`ONNX Runtime ${ort.env.versions ? ort.env.versions.common : ''} cannot load ` +
         `${modelPath}: ${e.message}`);
  }
}

// MODEL.onnx INPUTS.json: every output of any graph.
async function runInputs(modelPath, inputsPath) {
  const ort = loadOrt();
  let spec;
  try {
    spec = JSON.parse(fs.readFileSync(inputsPath, 'utf8'));
  } catch (e) {
    fail(`cannot read ${inputsPath} as JSON: ${e.message}`);
  }
  const feeds = {};
  for (const [name, t] of Object.entries(spec)) {
    const count = t.dims.reduce((a, b) => a * b, 1);
    if (!Array.isArray(t.data) || t.data.length !== count) {
      fail(`${inputsPath}: input ${name} has ${t.data && t.data.length} values for dims ` +
           `[${t.dims}]`);
    }
    if (t.type === 'float32') {
      feeds[name] = new ort.Tensor('float32', Float32Array.from(t.data), t.dims);
    } else if (t.type === 'int64') {
      feeds[name] = new ort.Tensor('int64', BigInt64Array.from(t.data, (v) => BigInt(v)), t.dims);
    } else {
      fail(`${inputsPath}: input ${name} has type ${t.type}; float32 or int64`);
    }
  }
  const session = await createSession(ort, modelPath);
  let results;
  try {
    results = await session.run(feeds);
  } catch (e) {
    fail(`ONNX Runtime cannot run ${modelPath} on ${inputsPath}: ${e.message}`);
  }
  const out = {};
  for (const [name, t] of Object.entries(results)) {
    out[name] = {dims: t.dims, data: Array.from(t.data, (v) => Number(v))};
  }
  process.stdout.write(JSON.stringify(out) + '\n');
}

async function main() {
  const args = process.argv.slice(2);
  if (args.length === 2) return runInputs(args[0], args[1]);
  if (args.length !== 6) {
    process.stderr.write('usage: node tests/onnx/ort_run.js MODEL.onnx IMAGES.f32 N H W C\n' +
                         '       node tests/onnx/ort_run.js MODEL.onnx INPUTS.json\n');
    process.exit(2);
  }
  const [modelPath, imagesPath, ...dimTexts] = args;
  const dims = dimTexts.map((t) => Number(t));
  if (!dims.every((d) => Number.isInteger(d) && d > 0)) {
    fail(`N H W C must be positive whole numbers, got ${dimTexts.join(' ')}`);
  }
  const ort = loadOrt();
  let bytes;
  try {
    bytes = fs.readFileSync(imagesPath);
  } catch (e) {
    fail(`cannot read ${imagesPath}: ${e.message}`);
  }
  const count = dims.reduce((a, b) => a * b, 1);
  if (bytes.length !== count * 4) {
    fail(`${imagesPath} holds ${bytes.length} bytes; N x H x W x C = ${dims.join(' x ')} ` +
         `float32 values are ${count * 4}`);
  }
  const pixels = new Float32Array(count);
  for (let i = 0; i < count; ++i) pixels[i] = bytes.readFloatLE(4 * i);

  const session = await createSession(ort, modelPath);
  let results;
  try {
    results = await session.run({images: new ort.Tensor('float32', pixels, dims)});
  } catch (e) {
    fail(`ONNX Runtime cannot run ${modelPath} on ${imagesPath}: ${e.message}`);
  }
  const probabilities = results.probabilities;
  const classes = results.classes;
  if (!probabilities || !classes) {
    fail(`${modelPath} has no outputs "probabilities" and "classes" (it has ` +
         `${Object.keys(results).join(', ')})`);
  }
  const n = dims[0];
  const k = probabilities.dims[1];
  if (probabilities.dims.length !== 2 || probabilities.dims[0] !== n || classes.dims[0] !== n) {
    fail(`${modelPath}: outputs of shape [${probabilities.dims}] and [${classes.dims}] for ` +
         `${n} images`);
  }
  const rows = [];
  for (let i = 0; i < n; ++i) rows.push(Array.from(probabilities.data.subarray(i * k, (i + 1) * k)));
  process.stdout.write(JSON.stringify({
    probabilities: rows,
    classes: Array.from(classes.data, (c) => Number(c)),
  }) + '\n');
}

main().catch((e) => fail(e.stack || String(e)));
