/**
 * The learner client against learners that misbehave (docs/learner.md): a wrong answer, an error
 * answer, silence and a process that dies all fail with ERR_LEARNER naming the learner and the
 * operation; nothing hangs. Real HTTP on 127.0.0.1.
 */
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import { HttpLearner } from '../../src/learner/http-learner';
import { decodeFrame, encodeFrame } from '../../src/learner/frame';
import { float32, int32 } from '../../src/io/export-tensor';
import { MempoError } from '../../src/errors';

type Handler = (req: http.IncomingMessage, body: Buffer, res: http.ServerResponse) => void;

async function fakeLearner(handler: Handler): Promise<{ url: string; close: () => Promise<void> }> {
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => handler(req, Buffer.concat(chunks), res));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    close: () => new Promise<void>((r) => {
      server.closeAllConnections();
      server.close(() => r());
    }),
  };
}

const sample = { ids: [5, 6, 7, 8], targetStart: 2 };

async function failure(p: Promise<unknown>): Promise<MempoError> {
  try {
    await p;
  } catch (e) {
    expect(e).toBeInstanceOf(MempoError);
    return e as MempoError;
  }
  throw new Error('expected a failure');
}

describe('frame', () => {
  it('round-trips params and I32 / F32 tensors', () => {
    const body = encodeFrame({ policy: 'reference', grad: true }, [['ids', int32([3], [1, 2, 3])], ['logp', float32([2], [-0.5, -1.25])]]);
    const f = decodeFrame(body, 'test');
    expect(f.params).toEqual({ policy: 'reference', grad: true });
    expect(Array.from(f.tensors.get('ids')!)).toEqual([1, 2, 3]);
    expect(Array.from(f.tensors.get('logp')!)).toEqual([-0.5, -1.25]);
  });

  it('names what is wrong in a malformed frame', () => {
    expect(() => decodeFrame(new Uint8Array(4), 'learner x POST /forward')).toThrow('learner x POST /forward: not a valid frame (4 bytes)');
    const big = new Uint8Array(16);
    new DataView(big.buffer).setBigUint64(0, 1000n, true);
    expect(() => decodeFrame(big, 'a')).toThrow('header length 1000 past the end of 16 bytes');
    const good = encodeFrame({}, [['logp', float32([2], [-1, -2])]]);
    expect(() => decodeFrame(good.subarray(0, good.length - 4), 'a')).toThrow('tensor logp: data_offsets [0, 8] do not hold 2 values inside the body');
  });
});

describe('HttpLearner against misbehaving learners', () => {
  it('a logp of the wrong length is an error naming the learner, the operation and the sizes', async () => {
    const f = await fakeLearner((_req, _body, res) => {
      res.setHeader('content-type', 'application/x-mempo-frame');
      res.end(encodeFrame({ forward_id: 1 }, [['logp', float32([1], [-1])]]));
    });
    try {
      const e = await failure(new HttpLearner(f.url).forward([sample]));
      expect(e.code).toBe('ERR_LEARNER');
      expect(e.message).toBe(`learner ${f.url} POST /forward: expected logp F32 [2], received Float32Array [1]`);
    } finally {
      await f.close();
    }
  });

  it('a positive log-probability is refused', async () => {
    const f = await fakeLearner((_req, _body, res) => res.end(encodeFrame({ forward_id: 1 }, [['logp', float32([2], [-1, 0.5])]])));
    try {
      expect((await failure(new HttpLearner(f.url).forward([sample]))).message).toContain('logp[1] = 0.5 is not a log-probability');
    } finally {
      await f.close();
    }
  });

  it('garbage instead of JSON, and an error answer, are reported with their text', async () => {
    const f = await fakeLearner((req, _body, res) => {
      if (req.url === '/optim_step') {
        res.statusCode = 400;
        res.end(JSON.stringify({ error: { code: 'bad_request', message: 'lr: expected a positive number' } }));
      } else res.end('<html>proxy error</html>');
    });
    try {
      const l = new HttpLearner(f.url);
      expect((await failure(l.info())).message).toBe(`learner ${f.url} GET /info: the answer is not a JSON object: "<html>proxy error</html>"`);
      const e = await failure(l.optimStep({ lr: 1, weightDecay: 0, maxGradNorm: 1, betas: [0.9, 0.999], eps: 1e-8 }));
      expect(e.message).toBe(`learner ${f.url} POST /optim_step: HTTP 400: bad_request: lr: expected a positive number`);
    } finally {
      await f.close();
    }
  });

  it('a learner that never answers times out; one that is gone is a connection error', async () => {
    const f = await fakeLearner(() => {});
    const l = new HttpLearner(f.url, { timeoutMs: 300 });
    const t0 = Date.now();
    expect((await failure(l.info())).message).toBe(`learner ${f.url} GET /info: no answer within 300 ms`);
    expect(Date.now() - t0).toBeLessThan(5000);
    await f.close();
    expect((await failure(new HttpLearner(f.url).info())).message).toMatch(new RegExp(`^learner ${f.url} GET /info: .*ECONNREFUSED`));
  });

  it('a protocol version it does not speak is refused', async () => {
    const f = await fakeLearner((_req, _body, res) => res.end(JSON.stringify({ protocol: 2, parameters: 1, step: 0 })));
    try {
      expect((await failure(new HttpLearner(f.url).info())).message).toContain('protocol 2, this mempo speaks protocol 1');
    } finally {
      await f.close();
    }
  });

  it('sends the bearer token and the frame the protocol defines', async () => {
    let seen: { auth?: string; params?: Record<string, unknown>; ids?: number[]; lengths?: number[]; starts?: number[] } = {};
    const f = await fakeLearner((req, body, res) => {
      const fr = decodeFrame(new Uint8Array(body), 'request');
      seen = { auth: req.headers.authorization, params: fr.params, ids: Array.from(fr.tensors.get('ids')!), lengths: Array.from(fr.tensors.get('lengths')!), starts: Array.from(fr.tensors.get('target_start')!) };
      res.end(encodeFrame({ forward_id: 7 }, [['logp', float32([3], [-1, -2, -3])]]));
    });
    try {
      const l = new HttpLearner(f.url, { token: 's3cret' });
      const out = await l.forward([sample, { ids: [1, 2], targetStart: 1 }], { policy: 'reference' });
      expect(seen).toEqual({ auth: 'Bearer s3cret', params: { policy: 'reference', grad: false }, ids: [5, 6, 7, 8, 1, 2], lengths: [4, 2], starts: [2, 1] });
      expect(out.map((a) => Array.from(a))).toEqual([[-1, -2], [-3]]);
      await expect(l.backward([new Float32Array(2)])).rejects.toThrow('backward needs a forward({ grad: true }) before it');
    } finally {
      await f.close();
    }
  });

  it('refuses samples without a target before sending anything', async () => {
    const l = new HttpLearner('http://127.0.0.1:9');
    await expect(l.forward([{ ids: [1, 2], targetStart: 2 }])).rejects.toThrow('Expected 1 ≤ targetStart < ids.length for sample 0 but received targetStart 2 with 2 ids');
    await expect(l.forward([{ ids: [1, -2], targetStart: 1 }])).rejects.toThrow('Expected token ids for sample 0 but ids[1] is -2');
  });

  it('splits a batch to the limits /info announces; over the graph limit, backward runs forward with grad and backward piece by piece', async () => {
    const limits = { max_forward_tokens: 10, max_forward_samples: 3, max_graph_tokens: 8 };
    const calls: string[] = [];
    let nextId = 1;
    let pending: { id: number; n: number } | null = null;
    const grads: number[][] = [];
    // a learner that enforces its limits as the torch learner does (413), and answers logp = -(index of the id)
    const f = await fakeLearner((req, body, res) => {
      if (req.url === '/info') {
        res.end(JSON.stringify({ protocol: 1, learner: 'fake', model: 'm', parameters: 1, device: 'cpu', dtype: 'fp32', step: 0, limits }));
        return;
      }
      const fr = decodeFrame(new Uint8Array(body), 'request');
      if (req.url === '/backward') {
        const g = Array.from(fr.tensors.get('grad')!);
        calls.push(`backward ${fr.params['forward_id']} [${g.length}]`);
        if (pending === null || pending.id !== fr.params['forward_id'] || pending.n !== g.length) {
          res.statusCode = 409;
          res.end(JSON.stringify({ error: { code: 'stale_forward', message: 'not pending' } }));
          return;
        }
        grads.push(g);
        pending = null;
        res.end(JSON.stringify({ tokens: 0, ms: 0 }));
        return;
      }
      const ids = Array.from(fr.tensors.get('ids')!);
      const lengths = Array.from(fr.tensors.get('lengths')!);
      const starts = Array.from(fr.tensors.get('target_start')!);
      const grad = fr.params['grad'] === true;
      calls.push(`forward ${grad ? 'grad' : 'nograd'} [${lengths.join(',')}]`);
      const padded = lengths.length * Math.max(...lengths);
      if (lengths.length > limits.max_forward_samples || ids.length > limits.max_forward_tokens || (grad && padded > limits.max_graph_tokens)) {
        res.statusCode = 413;
        res.end(JSON.stringify({ error: { code: 'bad_request', message: 'over a limit' } }));
        return;
      }
      const logp: number[] = [];
      let at = 0;
      lengths.forEach((n, i) => {
        for (let k = starts[i]!; k < n; k++) logp.push(-ids[at + k]!);
        at += n;
      });
      const id = nextId++;
      if (grad) pending = { id, n: logp.length };
      res.end(encodeFrame({ forward_id: id, tokens: ids.length }, [['logp', float32([logp.length], logp)]]));
    });
    try {
      const l = new HttpLearner(f.url);
      const batch = [
        { ids: [1, 2, 3, 4], targetStart: 1 }, { ids: [5, 6], targetStart: 1 }, { ids: [7, 8, 9], targetStart: 2 },
        { ids: [10, 11], targetStart: 1 }, { ids: [12, 13, 14, 15, 16], targetStart: 3 },
      ];
      const want = [[-2, -3, -4], [-6], [-9], [-11], [-15, -16]];
      // before info() the limits are unknown: one request, which this learner refuses
      await expect(l.forward(batch)).rejects.toThrow('HTTP 413');
      await l.info();
      calls.length = 0;
      // without grad: ≤ 3 samples and ≤ 10 ids a request
      expect((await l.forward(batch, { policy: 'reference' })).map((a) => Array.from(a))).toEqual(want);
      expect(calls).toEqual(['forward nograd [4,2,3]', 'forward nograd [2,5]']);
      calls.length = 0;
      // with grad: ≤ 8 padded tokens a request (rows × longest)
      expect((await l.forward(batch, { grad: true })).map((a) => Array.from(a))).toEqual(want);
      expect(calls).toEqual(['forward nograd [4,2]', 'forward nograd [3,2]', 'forward nograd [5]']);
      calls.length = 0;
      await l.backward(want.map((w, i) => Float32Array.from(w, (_, k) => 10 * i + k)));
      expect(calls).toEqual(['forward grad [4,2]', 'backward 6 [4]', 'forward grad [3,2]', 'backward 7 [2]', 'forward grad [5]', 'backward 8 [2]']);
      expect(grads).toEqual([[0, 1, 2, 10], [20, 30], [40, 41]]);
      await expect(l.backward([])).rejects.toThrow('backward needs a forward({ grad: true }) before it');
      // a batch within every limit keeps the one forward with grad
      calls.length = 0;
      await l.forward(batch.slice(1, 3), { grad: true });
      await l.backward([Float32Array.of(1), Float32Array.of(2)]);
      expect(calls).toEqual(['forward grad [2,3]', 'backward 9 [2]']);
      // a sample no request can hold is named before anything is sent
      calls.length = 0;
      await expect(l.forward([{ ids: [1, 2, 3, 4, 5, 6, 7, 8, 9], targetStart: 1 }], { grad: true })).rejects.toThrow("Expected at most 8 ids (the learner's max_graph_tokens) for sample 0 but received 9");
      expect(calls).toEqual([]);
    } finally {
      await f.close();
    }
  });
});
