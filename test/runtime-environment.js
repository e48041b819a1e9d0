// Jest environment for the model-runtime tests. onnxruntime-node's binding creates output
// tensors with the main realm's typed-array constructors, while onnxruntime-common (loaded
// inside Jest's sandbox) checks them with `instanceof` against the sandbox's constructors and
// rejects them ("A float32 tensor's data must be type of function Float32Array()"). Sharing the
// main realm's typed arrays with the sandbox makes both sides agree. Outside Jest there is one
// realm and nothing to fix.
const { TestEnvironment } = require('jest-environment-node');

const SHARED = [
  'ArrayBuffer', 'SharedArrayBuffer', 'DataView',
  'Int8Array', 'Uint8Array', 'Uint8ClampedArray', 'Int16Array', 'Uint16Array', 'Int32Array', 'Uint32Array',
  'Float32Array', 'Float64Array', 'BigInt64Array', 'BigUint64Array',
];

class RuntimeEnvironment extends TestEnvironment {
  constructor(config, context) {
    super(config, context);
    for (const name of SHARED) this.global[name] = globalThis[name];
  }
}

module.exports = RuntimeEnvironment;
