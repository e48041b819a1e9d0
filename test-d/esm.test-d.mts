// The ESM entry's types (dist/index.d.mts): the named exports are the CommonJS build's, and the
// default export is the whole module, as dist/index.mjs does at runtime.
import mempo, { backend, gatherLogProbs, ppoPolicyLoss, setBackend } from 'mempo';
import * as cjs from './cjs-module.js';
import { type Equal, type Expect } from './expect.js';

export type EsmEntry = [
  Expect<Equal<typeof gatherLogProbs, typeof cjs.mempo.gatherLogProbs>>,
  Expect<Equal<typeof ppoPolicyLoss, typeof cjs.mempo.ppoPolicyLoss>>,
  Expect<Equal<typeof mempo.backend, typeof backend>>,
  Expect<Equal<typeof mempo.setBackend, typeof setBackend>>,
];
