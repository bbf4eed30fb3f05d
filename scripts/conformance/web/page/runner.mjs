// Runs ONNX models on onnxruntime-web's WASM backend, case after case, for a Python server on loopback.
// Wire format, both ways: a little-endian uint32 header length, the JSON header, then the payload bytes
// (tensors' raw bytes back to back; string tensors travel as JSON arrays in the header).
import * as ort from '/ort/ort.wasm.min.mjs';

ort.env.wasm.wasmPaths = '/ort/';   // served from node_modules/onnxruntime-web/dist: no network
ort.env.wasm.numThreads = 1;        // threads need cross-origin isolation; one thread is deterministic
ort.env.wasm.proxy = false;
ort.env.logLevel = 'error';

const ARRAYS = {
  float32: Float32Array, float64: Float64Array, int8: Int8Array, uint8: Uint8Array, int16: Int16Array,
  uint16: Uint16Array, int32: Int32Array, uint32: Uint32Array, int64: BigInt64Array, uint64: BigUint64Array,
  bool: Uint8Array, float16: Uint16Array,  // float16 as its bits; ORT views them as a Float16Array where one exists
};

function decode(buffer) {
  const view = new DataView(buffer);
  const length = view.getUint32(0, true);
  const header = JSON.parse(new TextDecoder().decode(new Uint8Array(buffer, 4, length)));
  return [header, buffer.slice(4 + length)];
}

function encode(header, chunks) {
  const text = new TextEncoder().encode(JSON.stringify(header));
  const size = 4 + text.length + chunks.reduce((n, c) => n + c.byteLength, 0);
  const out = new Uint8Array(size);
  new DataView(out.buffer).setUint32(0, text.length, true);
  out.set(text, 4);
  let at = 4 + text.length;
  for (const c of chunks) { out.set(c, at); at += c.byteLength; }
  return out;
}

function inputTensor(spec, payload) {
  if (spec.type === 'string') return new ort.Tensor('string', spec.strings, spec.dims);
  const Array_ = ARRAYS[spec.type];
  if (!Array_) throw new Error(`no typed array for input type ${spec.type}`);
  const bytes = payload.slice(spec.offset, spec.offset + spec.nbytes);  // an aligned copy
  return new ort.Tensor(spec.type, new Array_(bytes), spec.dims);
}

function outputSpec(name, tensor, chunks, offset) {
  const spec = {name, type: tensor.type, dims: Array.from(tensor.dims)};
  const data = tensor.data;
  if (Array.isArray(data)) { spec.strings = data; return [spec, offset]; }
  if (!ArrayBuffer.isView(data)) throw new Error(`output ${name}: data of type ${tensor.type} is not an array`);
  // the raw bytes, whatever view ORT chose (Float16Array or Uint16Array for float16): bits unchanged
  const bytes = new Uint8Array(data.buffer, data.byteOffset, data.byteLength).slice();
  spec.array = data.constructor.name;
  spec.offset = offset; spec.nbytes = bytes.byteLength;
  chunks.push(bytes);
  return [spec, offset + bytes.byteLength];
}

async function runCase(header, payload) {
  const model = new Uint8Array(payload, 0, header.model_nbytes).slice();
  const inputs = payload.slice(header.model_nbytes);
  const options = {executionProviders: ['wasm'], graphOptimizationLevel: header.optimization || 'all',
                   logSeverityLevel: 4};
  let session;
  const t0 = performance.now();
  try {
    session = await ort.InferenceSession.create(model, options);
  } catch (error) {
    return [{id: header.id, status: 'refused', message: String(error && error.message || error)}, []];
  }
  const t1 = performance.now();
  try {
    const feeds = {};
    for (const spec of header.inputs) feeds[spec.name] = inputTensor(spec, inputs);
    let results = await session.run(feeds);
    const t2 = performance.now();
    const times = [];  // header.repeat more runs, each timed (the bench: inference only, session made once)
    for (let r = 0; r < (header.repeat || 0); r++) {
      const start = performance.now();
      results = await session.run(feeds);
      times.push(performance.now() - start);
    }
    const chunks = [], outputs = [];
    let offset = 0;
    for (const name of session.outputNames) {
      let spec;
      [spec, offset] = outputSpec(name, results[name], chunks, offset);
      outputs.push(spec);
    }
    return [{id: header.id, status: 'ok', outputs, create_ms: t1 - t0, run_ms: t2 - t1, times}, chunks];
  } catch (error) {
    return [{id: header.id, status: 'raised', message: String(error && error.message || error)}, []];
  } finally {
    await session.release();
  }
}

async function main() {
  const log = document.getElementById('log');
  await fetch('/ready', {method: 'POST', body: JSON.stringify({
    ort: ort.env.versions, userAgent: navigator.userAgent, float16Array: typeof Float16Array !== 'undefined',
    webnn: 'ml' in navigator, crossOriginIsolated: self.crossOriginIsolated})});
  for (let count = 0; ; ) {
    const response = await fetch('/next');
    if (response.status === 204) continue;      // nothing yet: ask again (the server holds each ask a while)
    const body = await response.arrayBuffer();
    if (response.status !== 200 || body.byteLength === 0) break;  // an empty answer: the run is over
    const [header, payload] = decode(body);
    let answer;
    try {
      answer = await runCase(header, payload);
    } catch (error) {
      answer = [{id: header.id, status: 'page error', message: String(error && error.stack || error)}, []];
    }
    await fetch('/result', {method: 'POST', body: encode(...answer)});
    log.textContent = `${++count} cases`;
  }
  log.textContent += ' (done)';
}

main().catch(async (error) => {
  await fetch('/fatal', {method: 'POST', body: String(error && error.stack || error)});
});
