#!/usr/bin/env node
// The ONNX Runtime side of `make bench`: loads one model with onnxruntime-node,
// times InferenceSession.run and prints one JSON object on stdout.
//
//   node bench/peers/ort_bench.js MODEL [--threads N] [--runs N] [--warmup N]
//                                 [--max-seconds S] [--seed N]
//
// MODEL is a model.onnx file or a folder in the ONNX backend-test layout
// (model.onnx + test_data_set_0/input_<i>.pb). Inputs come from
// test_data_set_0 when it exists, else they are deterministic random values
// (floats in [-1, 1), integers in [0, 4); symbolic dims are 1), as in
// `kiln bench`.
//
// Output (times in milliseconds, sizes in MiB):
//   {"runtime": "onnxruntime", "version", "model", "threads", "load_ms",
//    "warmup", "runs", "p50_ms", "p90_ms", "mean_ms", "min_ms", "samples_ms",
//    "baseline_rss_mb", "peak_rss_mb"}
// baseline_rss_mb is the resident size after onnxruntime-node is loaded and
// before the session is created (Node itself is ~40 MiB), so peak_rss_mb -
// baseline_rss_mb is what loading and running the model cost.
//
// Session options: intraOpNumThreads = --threads, interOpNumThreads = 1,
// sequential execution, every graph optimization (ORT's defaults otherwise,
// spinning thread pool included).
'use strict';

const fs = require('fs');
const path = require('path');

function fail(message) {
  process.stderr.write(`ort_bench: error: ${message}\n`);
  process.exit(1);
}

function parseArgs(argv) {
  const opts = {threads: 1, runs: 100, warmup: 10, maxSeconds: 0, seed: 0, model: null};
  const ints = {'--threads': 'threads', '--runs': 'runs', '--warmup': 'warmup', '--seed': 'seed'};
  for (let i = 0; i < argv.length; ++i) {
    let arg = argv[i];
    let value = null;
    const eq = arg.indexOf('=');
    if (arg.startsWith('--') && eq > 0) {
      value = arg.slice(eq + 1);
      arg = arg.slice(0, eq);
    }
    const takeValue = () => {
      if (value !== null) return value;
      if (i + 1 >= argv.length) fail(`${arg} needs a value`);
      return argv[++i];
    };
    if (arg in ints) {
      const text = takeValue();
      const n = Number(text);
      if (!Number.isInteger(n) || n < 0) fail(`${arg} expects a non-negative integer, got '${text}'`);
      opts[ints[arg]] = n;
    } else if (arg === '--max-seconds') {
      const text = takeValue();
      const s = Number(text);
      if (!Number.isFinite(s) || s < 0) fail(`--max-seconds expects a non-negative number, got '${text}'`);
      opts.maxSeconds = s;
    } else if (arg.startsWith('--')) {
      fail(`unknown flag '${arg}' (flags: --threads, --runs, --warmup, --max-seconds, --seed)`);
    } else if (opts.model === null) {
      opts.model = arg;
    } else {
      fail(`takes one MODEL, got also '${arg}'`);
    }
  }
  if (opts.model === null) fail('needs a MODEL (a model.onnx file or a backend-test folder)');
  if (opts.runs < 1) fail('--runs must be at least 1');
  if (opts.threads < 1) fail('--threads must be at least 1 (ORT would pick its own count)');
  return opts;
}

// --- A minimal reader of serialized onnx.TensorProto ----------------------

const DTYPES = {
  1: {name: 'float32', array: Float32Array, size: 4},
  2: {name: 'uint8', array: Uint8Array, size: 1},
  3: {name: 'int8', array: Int8Array, size: 1},
  4: {name: 'uint16', array: Uint16Array, size: 2},
  5: {name: 'int16', array: Int16Array, size: 2},
  6: {name: 'int32', array: Int32Array, size: 4},
  7: {name: 'int64', array: BigInt64Array, size: 8},
  9: {name: 'bool', array: Uint8Array, size: 1},
  10: {name: 'float16', array: Uint16Array, size: 2},
  11: {name: 'float64', array: Float64Array, size: 8},
  12: {name: 'uint32', array: Uint32Array, size: 4},
  13: {name: 'uint64', array: BigUint64Array, size: 8},
};

class Reader {
  constructor(buf, what) {
    this.buf = buf;
    this.pos = 0;
    this.what = what;
  }
  done() { return this.pos >= this.buf.length; }
  varint() {  // as BigInt: int64 dims and data need all 64 bits
    let result = 0n;
    let shift = 0n;
    for (;;) {
      if (this.pos >= this.buf.length) fail(`${this.what}: truncated varint`);
      const b = this.buf[this.pos++];
      result |= BigInt(b & 0x7f) << shift;
      if ((b & 0x80) === 0) return result;
      shift += 7n;
      if (shift > 63n) fail(`${this.what}: varint longer than 10 bytes`);
    }
  }
  bytes(n) {
    if (this.pos + n > this.buf.length) fail(`${this.what}: a field runs past the end of the file`);
    const out = this.buf.subarray(this.pos, this.pos + n);
    this.pos += n;
    return out;
  }
  skip(wireType) {
    if (wireType === 0) this.varint();
    else if (wireType === 1) this.bytes(8);
    else if (wireType === 2) this.bytes(Number(this.varint()));
    else if (wireType === 5) this.bytes(4);
    else fail(`${this.what}: unsupported protobuf wire type ${wireType}`);
  }
}

// Reads a TensorProto file into {name, type, dims, data} for new ort.Tensor.
function readTensorProto(file) {
  const buf = fs.readFileSync(file);
  const r = new Reader(buf, file);
  const dims = [];
  let dataType = 0;
  let name = '';
  let raw = null;
  const varints = [];  // int32_data / int64_data / uint64_data, in order
  let floats = null;
  let doubles = null;
  let hasExternal = false;
  while (!r.done()) {
    const key = Number(r.varint());
    const field = key >>> 3;
    const wire = key & 7;
    if (field === 1) {  // dims
      if (wire === 2) {
        const sub = new Reader(r.bytes(Number(r.varint())), file);
        while (!sub.done()) dims.push(BigInt.asIntN(64, sub.varint()));
      } else {
        dims.push(BigInt.asIntN(64, r.varint()));
      }
    } else if (field === 2 && wire === 0) {
      dataType = Number(r.varint());
    } else if (field === 4) {  // float_data
      if (wire === 2) {
        const b = r.bytes(Number(r.varint()));
        floats = (floats || []).concat(Array.from(new Float32Array(b.buffer.slice(b.byteOffset, b.byteOffset + b.length))));
      } else {
        const b = r.bytes(4);
        (floats = floats || []).push(new Float32Array(b.buffer.slice(b.byteOffset, b.byteOffset + 4))[0]);
      }
    } else if (field === 5 || field === 7 || field === 11) {  // int32_data, int64_data, uint64_data
      if (wire === 2) {
        const sub = new Reader(r.bytes(Number(r.varint())), file);
        while (!sub.done()) varints.push(sub.varint());
      } else {
        varints.push(r.varint());
      }
    } else if (field === 8 && wire === 2) {
      name = r.bytes(Number(r.varint())).toString('utf8');
    } else if (field === 9 && wire === 2) {
      raw = r.bytes(Number(r.varint()));
    } else if (field === 10) {  // double_data
      if (wire === 2) {
        const b = r.bytes(Number(r.varint()));
        doubles = Array.from(new Float64Array(b.buffer.slice(b.byteOffset, b.byteOffset + b.length)));
      } else {
        const b = r.bytes(8);
        (doubles = doubles || []).push(new Float64Array(b.buffer.slice(b.byteOffset, b.byteOffset + 8))[0]);
      }
    } else if (field === 13) {
      hasExternal = true;
      r.skip(wire);
    } else {
      r.skip(wire);
    }
  }
  if (hasExternal) fail(`${file}: tensors with external data are not supported by this reader`);
  const dt = DTYPES[dataType];
  if (!dt) fail(`${file}: data_type ${dataType} is not supported (numeric and bool tensors only)`);
  const numDims = dims.map((d) => Number(d));
  const count = numDims.reduce((a, b) => a * b, 1);
  let data;
  if (raw) {
    if (raw.length !== count * dt.size) {
      fail(`${file}: raw_data holds ${raw.length} bytes, expected ${count * dt.size} for ${dt.name}[${numDims}]`);
    }
    data = new dt.array(raw.buffer.slice(raw.byteOffset, raw.byteOffset + raw.length));
  } else {
    data = new dt.array(count);
    const source = dataType === 1 ? floats : dataType === 11 ? doubles : varints;
    const n = source ? source.length : 0;
    if (n !== count) fail(`${file}: holds ${n} elements, expected ${count} for ${dt.name}[${numDims}]`);
    for (let i = 0; i < count; ++i) {
      const v = source[i];
      if (typeof v === 'bigint') {
        if (dataType === 7) data[i] = BigInt.asIntN(64, v);
        else if (dataType === 13) data[i] = BigInt.asUintN(64, v);
        else data[i] = Number(BigInt.asIntN(32, v));
      } else {
        data[i] = v;
      }
    }
  }
  return {name, type: dt.name, dims: numDims, data};
}

// --- Random inputs (no test data) ----------------------------------------

// splitmix64: the same deterministic stream for every run of the script.
function makeRng(seed) {
  let state = BigInt.asUintN(64, BigInt(seed));
  return () => {
    state = BigInt.asUintN(64, state + 0x9e3779b97f4a7c15n);
    let z = state;
    z = BigInt.asUintN(64, (z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n);
    z = BigInt.asUintN(64, (z ^ (z >> 27n)) * 0x94d049bb133111ebn);
    z = z ^ (z >> 31n);
    return Number(z >> 11n) / 2 ** 53;  // [0, 1)
  };
}

function randomTensor(ort, meta, seed) {
  if (!meta.isTensor) fail(`input '${meta.name}' is not a tensor; give the model a test_data_set_0 folder`);
  const dims = (meta.shape || [1]).map((d) => (typeof d === 'number' && d >= 0 ? d : 1));
  const count = dims.reduce((a, b) => a * b, 1);
  const entry = Object.values(DTYPES).find((d) => d.name === meta.type);
  if (!entry) fail(`input '${meta.name}' has type ${meta.type}, which random inputs do not cover`);
  const rng = makeRng(seed);
  const data = new entry.array(count);
  for (let i = 0; i < count; ++i) {
    const u = rng();
    if (meta.type === 'float32' || meta.type === 'float64') data[i] = 2 * u - 1;
    else if (meta.type === 'bool') data[i] = u < 0.5 ? 0 : 1;
    else if (entry.array === BigInt64Array || entry.array === BigUint64Array) data[i] = BigInt(Math.floor(4 * u));
    else if (meta.type === 'float16') fail(`input '${meta.name}': random float16 inputs are not supported`);
    else data[i] = Math.floor(4 * u);
  }
  return new ort.Tensor(meta.type, data, dims);
}

// --- Measurement ---------------------------------------------------------

function rssMiB() {
  // /proc/self/statm: size resident ... in pages.
  try {
    const pages = Number(fs.readFileSync('/proc/self/statm', 'utf8').split(' ')[1]);
    return (pages * 4096) / (1024 * 1024);
  } catch (e) {
    return process.memoryUsage().rss / (1024 * 1024);
  }
}

function quantile(sorted, q) {
  // Nearest rank on the sorted samples (the same rule as kiln bench).
  if (sorted.length === 0) return 0;
  // 1e-9: 0.9 * 100 is 90.00000000000001 in binary floating point.
  const rank = Math.ceil(q * sorted.length - 1e-9);
  return sorted[Math.min(sorted.length, Math.max(1, rank)) - 1];
}

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  let modelPath = opts.model;
  let dataDir = null;
  if (!fs.existsSync(modelPath)) fail(`model '${modelPath}' does not exist`);
  if (fs.statSync(modelPath).isDirectory()) {
    dataDir = path.join(modelPath, 'test_data_set_0');
    modelPath = path.join(modelPath, 'model.onnx');
    if (!fs.existsSync(modelPath)) fail(`folder '${opts.model}' has no model.onnx`);
    if (!fs.existsSync(dataDir)) dataDir = null;
  }

  let ort;
  try {
    ort = require('onnxruntime-node');
  } catch (e) {
    fail(`cannot load onnxruntime-node (${e.message}); run 'npm ci --ignore-scripts' in bench/peers`);
  }
  // After the library is loaded, as Kiln's baseline includes its own code.
  const baselineRss = rssMiB();
  const sessionOptions = {
    intraOpNumThreads: opts.threads,
    interOpNumThreads: 1,
    executionMode: 'sequential',
    graphOptimizationLevel: 'all',
  };
  const t0 = process.hrtime.bigint();
  const session = await ort.InferenceSession.create(modelPath, sessionOptions);
  const loadMs = Number(process.hrtime.bigint() - t0) / 1e6;

  const feeds = {};
  const names = session.inputNames;
  for (let i = 0; i < names.length; ++i) {
    const file = dataDir && path.join(dataDir, `input_${i}.pb`);
    if (file && fs.existsSync(file)) {
      const t = readTensorProto(file);
      feeds[names[i]] = new ort.Tensor(t.type, t.data, t.dims);
    } else {
      const meta = (session.inputMetadata || []).find((m) => m.name === names[i]);
      if (!meta) fail(`no data for input '${names[i]}' and this onnxruntime-node has no inputMetadata`);
      feeds[names[i]] = randomTensor(ort, meta, opts.seed + i);
    }
  }

  for (let i = 0; i < opts.warmup; ++i) await session.run(feeds);
  const samples = [];
  const start = process.hrtime.bigint();
  const minRuns = Math.min(opts.runs, 5);
  for (let i = 0; i < opts.runs; ++i) {
    const a = process.hrtime.bigint();
    await session.run(feeds);
    const b = process.hrtime.bigint();
    samples.push(Number(b - a) / 1e6);
    if (opts.maxSeconds > 0 && samples.length >= minRuns && Number(b - start) / 1e9 >= opts.maxSeconds) break;
  }
  const peakRss = process.resourceUsage().maxRSS / 1024;  // KiB -> MiB
  await session.release();

  const sorted = samples.slice().sort((a, b) => a - b);
  const round = (x) => Math.round(x * 1e4) / 1e4;
  const result = {
    runtime: 'onnxruntime',
    version: require('onnxruntime-node/package.json').version,
    model: opts.model,
    threads: opts.threads,
    load_ms: round(loadMs),
    warmup: opts.warmup,
    runs: samples.length,
    p50_ms: round(quantile(sorted, 0.5)),
    p90_ms: round(quantile(sorted, 0.9)),
    mean_ms: round(samples.reduce((a, b) => a + b, 0) / samples.length),
    min_ms: round(sorted[0]),
    baseline_rss_mb: round(baselineRss),
    peak_rss_mb: round(peakRss),
    samples_ms: samples.map(round),
  };
  process.stdout.write(JSON.stringify(result) + '\n');
}

main().catch((e) => fail(e && e.message ? e.message : String(e)));
