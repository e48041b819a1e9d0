/**
 * `mempo serve-retriever` against a hostile client (issue 47, items 3, 4 and 9a), over real HTTP
 * on loopback and through the built command (dist/cli/main.js):
 *
 * - off loopback without a token (no --token, no MEMPO_SERVE_TOKEN) it exits 2 before reading the
 *   corpus; with one, a request without `Authorization: Bearer <token>` gets 401 from its headers,
 *   and mempo's client (HttpRetriever) sends the token;
 * - /access: a URL named twice is refused (1,024 times one page was a 256 MB answer, and a page
 *   of 250k U+0001 a 500 `Invalid string length`); the answer's size as JSON is counted before it
 *   is built, to the byte (413 naming maxAnswerBytes); HttpRetriever halves what is too large;
 * - answers their clients do not read are bounded (503 naming maxPendingBytes), and are released
 *   when the client reads them or goes away;
 * - at most 256 connections; headers and bodies trickled past 10 s are cut off (408).
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import type { Server } from 'node:http';
import { connect, type Socket } from 'node:net';
import { networkInterfaces, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { Bm25Retriever } from '../../src/retrieval/bm25';
import { PageStore } from '../../src/retrieval/pages';
import { HttpRetriever } from '../../src/retrieval/http-retriever';
import { createRetrievalServer, jsonStringBytes, listen, RETRIEVAL_SERVER_DEFAULTS } from '../../src/servers/retrieval-server';

const TOKEN_ENV = 'MEMPO_SERVE_TOKEN';
const BIN = resolve(__dirname, '..', '..', 'dist', 'cli', 'main.js');
const testBuilt = existsSync(BIN) ? test : test.skip;
if (!existsSync(BIN)) console.warn(`retrieval-hardening: ${BIN} is not built (npm run build:ts); the CLI tests are skipped`);

/** This machine's first non-loopback IPv4 address, or undefined (0.0.0.0 is still tried). */
const OFF_LOOPBACK = Object.values(networkInterfaces())
  .flat()
  .find((a) => a !== undefined && a.family === 'IPv4' && !a.internal)?.address;

const PAGE_CHARS = RETRIEVAL_SERVER_DEFAULTS.maxPageChars;
const big = (i: number) => `https://p/big-${i}`;
const ctl = (i: number) => `https://p/ctl-${i}`;
const quote = (i: number) => `https://p/quote-${i}`;
const MIXED = 'é€😀\ud800x\n\t"\\\u0001\u001f\u2028\udc00';
const pages = [
  ...Array.from({ length: 80 }, (_, i) => ({ url: big(i), title: `Big ${i}`, contents: `${i} `.padEnd(PAGE_CHARS + 1000, 'a') })),
  ...Array.from({ length: 12 }, (_, i) => ({ url: ctl(i), title: 'C', contents: '\u0001'.repeat(PAGE_CHARS) })),
  ...Array.from({ length: 40 }, (_, i) => ({ url: quote(i), title: 'Q', contents: '"'.repeat(PAGE_CHARS) })),
  { url: 'https://p/mixed', title: 'Mixed "title" 😀', contents: MIXED.repeat(1000) },
];
const corpus = [{ id: 'd1', title: 'Mamek', contents: 'Mamek is a city in Thersekle.', url: big(0) }];
const local = new Bm25Retriever(corpus, {}, 'bm25', new PageStore(pages));

const servers: Server[] = [];
async function serve(options: Parameters<typeof createRetrievalServer>[1] = {}, host = '127.0.0.1'): Promise<{ server: Server; url: string; base: string }> {
  const server = createRetrievalServer(local, options);
  servers.push(server);
  const url = await listen(server, 0, host);
  return { server, url, base: url.replace(/\/retrieve$/, '') };
}
afterAll(async () => {
  for (const s of servers) {
    s.closeAllConnections();
    await new Promise((r) => s.close(r));
  }
});

async function postAccess(base: string, urls: string[], headers: Record<string, string> = {}): Promise<{ status: number; bytes: number; json: Record<string, unknown> }> {
  const res = await fetch(`${base}/access`, { method: 'POST', headers, body: JSON.stringify({ urls }) });
  const buf = Buffer.from(await res.arrayBuffer());
  return { status: res.status, bytes: buf.length, json: JSON.parse(buf.toString('utf8')) as Record<string, unknown> };
}

/** A raw connection to `base`; resolves once connected. */
function open(base: string): Promise<Socket> {
  const u = new URL(base);
  return new Promise((res, rej) => {
    const s = connect(Number(u.port), u.hostname, () => res(s));
    s.once('error', rej);
  });
}

/** Resolves with what the server sent once it closes `sock` (or 'still open' after `ms`). */
function whenClosed(sock: Socket, ms: number): Promise<{ text: string; after: number } | 'still open'> {
  const t0 = Date.now();
  let text = '';
  sock.on('data', (c: Buffer) => (text += c.toString()));
  sock.on('error', () => undefined);
  return new Promise((res) => {
    const timer = setTimeout(() => res('still open'), ms);
    sock.once('close', () => {
      clearTimeout(timer);
      res({ text, after: Date.now() - t0 });
    });
  });
}

describe('jsonStringBytes counts JSON.stringify to the byte', () => {
  it.each([
    ['plain ASCII', 'Mamek is a city'],
    ['quotes and backslashes', '"\\"\\\\'],
    ['control characters, short and \\u escapes', '\b\f\n\r\t\u0000\u0001\u001f\u007f'],
    ['two-, three- and four-byte UTF-8', 'é€😀\u2028\u2029'],
    ['lone surrogates, high at the end', 'a\udc00b\ud800'],
    ['the mixed page', MIXED.repeat(3)],
  ])('%s', (_name, s) => {
    expect(jsonStringBytes(s)).toBe(Buffer.byteLength(JSON.stringify(s), 'utf8'));
  });

  it('stops counting past the limit, with a count above it', () => {
    const n = jsonStringBytes('"'.repeat(1_000_000), 100);
    expect(n).toBeGreaterThan(100);
    expect(n).toBeLessThan(200);
  });
});

describe('serve-retriever off loopback needs a token', () => {
  /** Runs the built CLI until it exits or `until` is seen on stderr; `env` is added to (or, undefined, removed from) the environment. */
  function runBin(args: string[], env: Record<string, string | undefined>, until?: RegExp): Promise<{ code: number | null; err: string; match: RegExpMatchArray | null; kill: () => Promise<number | null> }> {
    const e = { ...process.env };
    for (const [k, v] of Object.entries(env)) {
      if (v === undefined) delete e[k];
      else e[k] = v;
    }
    const child = spawn(process.execPath, [BIN, ...args], { stdio: ['ignore', 'ignore', 'pipe'], env: e });
    let err = '';
    const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
    const kill = () => {
      child.kill('SIGTERM');
      return exited;
    };
    return new Promise((res) => {
      const timer = setTimeout(() => {
        child.kill('SIGKILL');
        res({ code: null, err, match: null, kill });
      }, 20_000);
      child.stderr!.on('data', (c: Buffer) => {
        err += c.toString();
        const m = until === undefined ? null : err.match(until);
        if (m !== null) {
          clearTimeout(timer);
          res({ code: null, err, match: m, kill });
        }
      });
      void exited.then((code) => {
        clearTimeout(timer);
        res({ code, err, match: null, kill });
      });
    });
  }

  testBuilt(`refuses --host 0.0.0.0 (and this machine's own address) without --token or ${TOKEN_ENV}: exit 2, naming the fix`, async () => {
    for (const h of ['0.0.0.0', ...(OFF_LOOPBACK === undefined ? [] : [OFF_LOOPBACK])]) {
      const r = await runBin(['serve-retriever', '--host', h, '--port', '0'], { [TOKEN_ENV]: undefined });
      expect(r.code).toBe(2);
      expect(r.err).toBe(
        `error: --host ${h} is not a loopback address (${h}): give --token (or ${TOKEN_ENV}), so that only clients sending ` +
          "'Authorization: Bearer <token>' can search the corpus or read its pages (POST /retrieve, POST /access)\n",
      );
    }
  }, 60_000);

  testBuilt(`with ${TOKEN_ENV} it binds 0.0.0.0 and answers only requests carrying the token`, async () => {
    const token = 'r3trieval-token';
    const r = await runBin(['serve-retriever', '--host', '0.0.0.0', '--port', '0'], { [TOKEN_ENV]: token }, /listening on http:\/\/0\.0\.0\.0:(\d+)\/retrieve(.*)\n/);
    expect(r.match).not.toBeNull();
    expect(r.match![2]).toBe('; every request needs Authorization: Bearer <token>');
    const url = `http://127.0.0.1:${r.match![1]}/retrieve`;
    const body = JSON.stringify({ queries: ['Mamek'] });
    expect((await fetch(url, { method: 'POST', body })).status).toBe(401);
    expect((await fetch(url, { method: 'POST', body, headers: { authorization: `Bearer x${token}` } })).status).toBe(401);
    expect((await fetch(url, { method: 'POST', body, headers: { authorization: `Bearer ${token}` } })).status).toBe(200);
    expect(await r.kill()).toBe(0);
  }, 60_000);

  it('the library refuses the same bind (nothing listens); with a token, 401 comes from the headers and HttpRetriever sends the token', async () => {
    const bare = createRetrievalServer(local);
    await expect(listen(bare, 0, '0.0.0.0')).rejects.toMatchObject({ code: 'ERR_INVALID_OPTION' });
    expect(bare.listening).toBe(false);

    const token = 'lib-token';
    const { base, url } = await serve({ token });
    // 100 MB announced and none sent: answered 401 from the headers at once.
    const sock = await open(base);
    const closed = whenClosed(sock, 5000);
    sock.write(`POST /access HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000000\r\n\r\n`);
    const got = await closed;
    expect(got).not.toBe('still open');
    expect((got as { text: string }).text).toMatch(/^HTTP\/1\.1 401 /);

    const withToken = new HttpRetriever(url, { retries: 0, token });
    expect((await withToken.search(['Mamek'], 1))[0]![0]!.title).toBe('Mamek');
    expect(await withToken.hasPages()).toBe(true);
    expect((await withToken.access([ctl(0)]))[0]!.contents).toBe('\u0001'.repeat(PAGE_CHARS));
    const without = new HttpRetriever(url, { retries: 0 });
    await expect(without.search(['Mamek'], 1)).rejects.toThrow(`answered HTTP 401: {"error":"a valid Authorization: Bearer <token> is required (mempo serve-retriever --token)"}; set ${TOKEN_ENV} to the token the server was started with`);
  });
});

describe('/access answers are bounded', () => {
  let base = '';
  let url = '';
  beforeAll(async () => {
    ({ base, url } = await serve());
  });

  it('a URL named twice is a 400 naming the field: 1,024 times a page of 250k U+0001 is no longer a 500', async () => {
    const r = await postAccess(base, Array.from({ length: 1024 }, () => ctl(0)));
    expect(r.status).toBe(400);
    expect(r.json).toEqual({ error: 'field "urls[1]": repeats urls[0]; ask for each URL once per request' });
    const q = await postAccess(base, [quote(0), big(1), quote(0)]);
    expect(q.status).toBe(400);
    expect(q.json).toEqual({ error: 'field "urls[2]": repeats urls[0]; ask for each URL once per request' });
  });

  it('pages of 250k U+0001 or `"` are answered whole, and too many of them are a 413 naming maxAnswerBytes, not a 500', async () => {
    const one = await postAccess(base, [ctl(0), quote(0)]);
    expect(one.status).toBe(200);
    expect(one.json).toEqual({ result: [{ url: ctl(0), title: 'C', contents: '\u0001'.repeat(PAGE_CHARS) }, { url: quote(0), title: 'Q', contents: '"'.repeat(PAGE_CHARS) }] });
    // 12 × 1.5 MB and 40 × 0.5 MB of escapes: past 16 MiB.
    for (const urls of [Array.from({ length: 12 }, (_, i) => ctl(i)), Array.from({ length: 40 }, (_, i) => quote(i)), Array.from({ length: 80 }, (_, i) => big(i))]) {
      const r = await postAccess(base, urls);
      expect(r.status).toBe(413);
      expect(r.json).toEqual({ error: `the answer to these ${urls.length} URLs would pass ${16 << 20} bytes (maxAnswerBytes); ask for fewer URLs at once` });
    }
  });

  it('maxAnswerBytes is the answer\'s exact size: a limit of its length answers, one byte less is a 413', async () => {
    const urls = [ctl(1), 'https://p/nowhere', 'https://p/mixed', big(3)];
    const full = await postAccess(base, urls);
    expect(full.status).toBe(200);
    const exact = await serve({ maxAnswerBytes: full.bytes });
    expect((await postAccess(exact.base, urls)).status).toBe(200);
    const under = await serve({ maxAnswerBytes: full.bytes - 1 });
    const r = await postAccess(under.base, urls);
    expect(r.status).toBe(413);
    expect(r.json.error).toContain(`would pass ${full.bytes - 1} bytes (maxAnswerBytes)`);
  });

  it('HttpRetriever asks for each URL once and halves a request whose answer is too large', async () => {
    const asked = [...Array.from({ length: 80 }, (_, i) => big(i)), big(5), 'https://p/nowhere', big(5)];
    const got = await new HttpRetriever(url, { retries: 0 }).access(asked);
    expect(got).toHaveLength(asked.length);
    asked.forEach((u, i) => {
      const page = pages.find((p) => p.url === u);
      expect(got[i]).toEqual(page === undefined ? null : { url: u, title: page.title, contents: page.contents.slice(0, PAGE_CHARS) });
    });
  });
});

describe('answers their clients do not read are bounded (maxPendingBytes)', () => {
  // 56 pages of 250k characters: a 14 MB answer, more than loopback's socket buffers take while unread.
  const urls = Array.from({ length: 56 }, (_, i) => big(i));
  const request = (host: string) => `POST /access HTTP/1.1\r\nHost: ${host}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(JSON.stringify({ urls }))}\r\n\r\n${JSON.stringify({ urls })}`;

  it('a second answer past the limit gets 503 naming it while the first is unread; reading it, or going away, frees it', async () => {
    const { base } = await serve({ maxPendingBytes: 20_000_000 });
    const host = new URL(base).host;
    const slow = await open(base);
    slow.pause();
    slow.write(request(host));
    await new Promise((r) => slow.once('readable', r)); // the server has started writing its answer

    const refused = await postAccess(base, urls);
    expect(refused.status).toBe(503);
    expect(refused.json.error).toMatch(/^the server holds \d+ bytes of answers their clients have not read yet; with this one of \d+ that would pass 20000000 \(maxPendingBytes\): retry later$/);

    // The slow client reads its answer whole: the next request is answered.
    const head = await new Promise<string>((res) => {
      const chunks: Buffer[] = [];
      let size = 0;
      let want = Infinity;
      slow.on('data', (c: Buffer) => {
        chunks.push(c);
        size += c.length;
        if (want === Infinity) {
          const all = Buffer.concat(chunks).toString('latin1');
          const end = all.indexOf('\r\n\r\n');
          const len = /content-length: (\d+)/i.exec(all);
          if (end >= 0 && len !== null) want = end + 4 + Number(len[1]);
        }
        if (size >= want) res(Buffer.concat(chunks).subarray(0, 64).toString('latin1'));
      });
      slow.resume();
    });
    expect(head).toMatch(/^HTTP\/1\.1 200 /);
    expect((await postAccess(base, urls)).status).toBe(200);

    // Another one never reads and goes away: its answer is released with its connection.
    const gone = await open(base);
    gone.pause();
    gone.write(request(host));
    await new Promise((r) => gone.once('readable', r));
    expect((await postAccess(base, urls)).status).toBe(503);
    gone.destroy();
    await new Promise((r) => setTimeout(r, 200));
    expect((await postAccess(base, urls)).status).toBe(200);
    slow.destroy();
  }, 60_000);
});

describe('connection limits (the learner\'s: 256 connections, 10 s for headers, 10 s for a request)', () => {
  it('past 256 open connections a new one is closed at once; one fewer lets the next in', async () => {
    const { server, base, url } = await serve();
    const socks: Socket[] = [];
    for (let i = 0; i < 256; i++) socks.push(await open(base));
    for (let n = 0; n !== 256; ) {
      n = await new Promise<number>((r) => server.getConnections((_e, c) => r(c)));
      if (n !== 256) await new Promise((r) => setTimeout(r, 20));
    }
    const extra = await open(base);
    const shut = await whenClosed(extra, 3000);
    expect(shut).not.toBe('still open');
    expect((shut as { text: string }).text).toBe('');
    socks.pop()!.destroy();
    await new Promise((r) => setTimeout(r, 100));
    const res = await fetch(url, { method: 'POST', body: JSON.stringify({ queries: ['Mamek'] }) });
    expect(res.status).toBe(200);
    for (const s of socks) s.destroy();
  }, 30_000);

  it('headers or a body trickled past 10 s are cut off with 408', async () => {
    const { base } = await serve();
    const headers = await open(base);
    const body = await open(base);
    const headersClosed = whenClosed(headers, 16_000);
    const bodyClosed = whenClosed(body, 16_000);
    headers.write('POST /retrieve HTTP/1.1\r\nHost: x\r\n');
    body.write('POST /retrieve HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"queries":');
    // One byte a second: each write is well inside any idle limit, the whole far past 10 s.
    const trickle = setInterval(() => {
      if (!headers.destroyed) headers.write('X');
      if (!body.destroyed) body.write(' ');
    }, 1000);
    const [h, b] = await Promise.all([headersClosed, bodyClosed]);
    clearInterval(trickle);
    for (const [got, what] of [[h, 'headers'], [b, 'body']] as const) {
      expect({ what, got }).toEqual({ what, got: expect.objectContaining({ text: expect.stringMatching(/^HTTP\/1\.1 408 /) }) });
      const after = (got as { after: number }).after;
      expect(after).toBeGreaterThanOrEqual(9_000);
      expect(after).toBeLessThan(14_000);
    }
  }, 30_000);
});
