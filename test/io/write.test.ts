/**
 * Writes that never leave a short file (src/io/write.ts): `write(2)` may write fewer bytes than
 * asked; writeFileAtomic and the JSONL writer loop until every byte is written or fail naming
 * the file. Checked with an injected write call, and on a real full disk (a 16 KiB tmpfs in a
 * mount namespace, when `unshare -m` can mount one: root on Linux) through the built package.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { canMountTmpfs } from '../helpers';
import { JsonlWriter, writeAll, writeFileAtomic, type WriteFn } from '../../src/io/run-dir';

/** A write call that writes at most `chunk` bytes, then (after `budget` bytes) nothing or ENOSPC. */
function shortWriter(chunk: number, budget = Infinity, full: 'zero' | 'enospc' = 'enospc'): WriteFn & { calls: number } {
  let left = budget;
  const fn = ((fd: number, buf: Uint8Array, off: number, len: number) => {
    fn.calls++;
    if (left <= 0) {
      if (full === 'zero') return 0;
      throw Object.assign(new Error('ENOSPC: no space left on device, write'), { code: 'ENOSPC' });
    }
    const n = writeSync(fd, buf, off, Math.min(len, chunk, left));
    left -= n;
    return n;
  }) as WriteFn & { calls: number };
  fn.calls = 0;
  return fn;
}

const dir = mkdtempSync(join(tmpdir(), 'mempo-write-'));

describe('short writes', () => {
  test('writeFileAtomic loops on short writes until the whole text is written', () => {
    const file = join(dir, 'report.html');
    const text = `<!doctype html>${'é'.repeat(5000)}</html>`;
    const w = shortWriter(1000);
    writeFileAtomic(file, text, { write: w });
    expect(readFileSync(file, 'utf8')).toBe(text);
    expect(w.calls).toBeGreaterThan(10);
  });

  test('a full disk fails naming the file and leaves the old file, no temp file', () => {
    const file = join(dir, 'summary.json');
    writeFileAtomic(file, '{"old":true}\n');
    expect(() => writeFileAtomic(file, 'x'.repeat(50000), { write: shortWriter(4096, 16384) })).toThrow(`Cannot write ${file}: ENOSPC: no space left on device, write (16384 of 50000 bytes written)`);
    expect(() => writeFileAtomic(file, 'x'.repeat(50000), { write: shortWriter(4096, 8192, 'zero') })).toThrow(`Cannot write ${file}: the system wrote nothing (disk full?) (8192 of 50000 bytes written)`);
    expect(readFileSync(file, 'utf8')).toBe('{"old":true}\n');
    expect(readdirSync(dir).filter((f) => f.endsWith('.tmp'))).toEqual([]);
  });

  test('writeAll names the error code of the system error', () => {
    let err: (Error & { code?: string }) | undefined;
    try {
      writeAll(1, new Uint8Array(4), '/some/file', shortWriter(1, 0));
    } catch (e) {
      err = e as Error & { code?: string };
    }
    expect(err?.code).toBe('ENOSPC');
  });

  test('the JSONL writer loops on short writes, and on a full disk cuts the file back to its last whole line', () => {
    const file = join(dir, 'batch.jsonl');
    const ok = new JsonlWriter(file, false, { write: shortWriter(7) });
    ok.write([{ uid: 'a', sample: 0, text: 'ü'.repeat(100) }, { uid: 'a', sample: 1 }]);
    ok.close();
    const whole = '{"uid":"a","sample":0,"text":"' + 'ü'.repeat(100) + '"}\n{"uid":"a","sample":1}\n';
    expect(readFileSync(file, 'utf8')).toBe(whole);
    const full = new JsonlWriter(file, true, { write: shortWriter(64, 100) });
    expect(() => full.write([{ uid: 'b', sample: 0, text: 'y'.repeat(500) }])).toThrow(`Cannot write ${file}: ENOSPC`);
    full.close();
    expect(readFileSync(file, 'utf8')).toBe(whole);
  });
});

// The real thing: the built package on a 16 KiB tmpfs (what `npm run build:ts` writes to dist/).
const RUN_DIR = resolve(__dirname, '..', '..', 'dist', 'io', 'run-dir.js');
const tmpfs = canMountTmpfs(dir, '16k', RUN_DIR) ? test : test.skip;

/** Runs `script` (with `m` = dist/io/run-dir.js, `d` = the mount point) in a mount namespace with a 16 KiB tmpfs at `d`. */
function onTinyDisk(script: string): { status: number | null; out: string; err: string } {
  const mnt = mkdtempSync(join(tmpdir(), 'mempo-tmpfs-'));
  const js = `const m = require(${JSON.stringify(RUN_DIR)}); const fs = require('fs'); const d = ${JSON.stringify(mnt)}; ${script}`;
  const r = spawnSync('unshare', ['-m', 'sh', '-c', `mount -t tmpfs -o size=16k tmpfs "$0" && exec "$1" -e "$2"`, mnt, process.execPath, js], { encoding: 'utf8' });
  return { status: r.status, out: r.stdout, err: r.stderr };
}

tmpfs('disk full: writeFileAtomic fails naming the file instead of renaming a truncated one into place', () => {
  const r = onTinyDisk(`
    let error = null;
    try { m.writeFileAtomic(d + '/report.html', '<html>' + 'x'.repeat(40000) + '</html>'); } catch (e) { error = e.message; }
    console.log(JSON.stringify({ error, files: fs.readdirSync(d) }));`);
  expect(r.err).toBe('');
  const res = JSON.parse(r.out);
  expect(res.error).toMatch(/^Cannot write \/.*\/report\.html: ENOSPC: no space left on device/);
  expect(res.files).toEqual([]);
});

tmpfs('disk full: the JSONL writer fails naming the file and leaves only whole lines', () => {
  const r = onTinyDisk(`
    const w = new m.JsonlWriter(d + '/batch.jsonl', true);
    w.write([{ uid: 'a', sample: 0 }]);
    let error = null;
    try { w.write([{ uid: 'a', sample: 1, text: 'y'.repeat(40000) }]); } catch (e) { error = e.message; }
    w.close();
    console.log(JSON.stringify({ error, text: fs.readFileSync(d + '/batch.jsonl', 'utf8') }));`);
  expect(r.err).toBe('');
  const res = JSON.parse(r.out);
  expect(res.error).toMatch(/^Cannot write \/.*\/batch\.jsonl: ENOSPC/);
  expect(res.text).toBe('{"uid":"a","sample":0}\n');
});
