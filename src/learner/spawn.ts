/**
 * Starts the torch reference learner (docs/learner.md, "Starting the torch learner") as a child
 * process and connects to it. A learner that dies fails every request with its exit status and
 * the end of its stderr; it never leaves mempo waiting.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { MempoError } from '../errors';
import { EMBEDDED } from '../paths';
import { HttpLearner, type HttpLearnerOptions } from './http-learner';

export interface SpawnLearnerOptions extends HttpLearnerOptions {
  /** Model directory the learner starts from (also the KL reference). */
  model: string;
  /** Python interpreter (default: MEMPO_PYTHON, else the first of python3, /usr/bin/python3 that imports torch). */
  python?: string;
  seed?: number;
  device?: 'auto' | 'cpu' | 'cuda';
  threads?: number;
  /** Processes (ranks) of the learner, data parallel, one per device (`--nproc`, docs/learner.md "Several processes"); default 1. */
  procs?: number;
  /** How long the learner may take to import torch and load the model (ms). */
  startTimeoutMs?: number;
  /** Receives the learner's stderr lines (its log). */
  onLog?: (line: string) => void;
}

const STDERR_TAIL = 4000;

/** The first interpreter that imports torch; an error naming every candidate when none does. */
export function findPython(given?: string): string {
  const candidates = given !== undefined ? [given] : process.env['MEMPO_PYTHON'] ? [process.env['MEMPO_PYTHON']] : ['python3', '/usr/bin/python3'];
  const tried: string[] = [];
  for (const py of candidates) {
    const r = spawnSync(py, ['-c', 'import torch'], { encoding: 'utf8', timeout: 60_000 });
    if (r.status === 0) return py;
    tried.push(`${py}: ${r.error ? r.error.message : (r.stderr.trim().split('\n').pop() ?? `exit ${r.status}`)}`);
  }
  throw new MempoError(
    'ERR_LEARNER',
    `No Python with torch for the learner (${tried.join('; ')}). Install torch (Debian: apt-get install python3-torch libopenblas0-pthread), or name an interpreter with --python / MEMPO_PYTHON, or run a learner elsewhere and pass --learner URL`,
  );
}

/** A learner process mempo started: closing it shuts it down. */
export class SpawnedLearner extends HttpLearner {
  constructor(url: string, options: HttpLearnerOptions, private readonly child: ChildProcess, private readonly exited: Promise<void>) {
    super(url, options);
  }

  /** The learner's process id. */
  get pid(): number | undefined {
    return this.child.pid;
  }

  /** A connection that broke because the process died is reported as its death (exit status, stderr). */
  protected override async explain(e: unknown): Promise<unknown> {
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([this.exited, new Promise<void>((r) => { timer = setTimeout(r, 2000); })]);
    clearTimeout(timer);
    return this.failed ?? e;
  }

  override async close(): Promise<void> {
    try {
      await super.close(true);
    } catch {
      // it may be gone already: it is killed below either way
    }
    const timer = setTimeout(() => this.child.kill('SIGKILL'), 5000);
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill('SIGTERM');
    await this.exited;
    clearTimeout(timer);
  }
}

export async function spawnLearner(options: SpawnLearnerOptions): Promise<SpawnedLearner> {
  const procs = options.procs ?? 1;
  if (!Number.isSafeInteger(procs) || procs < 1) throw new MempoError('ERR_INVALID_OPTION', `Expected an integer >= 1 for procs but received ${String(procs)}`);
  const python = findPython(options.python);
  const args = ['-m', 'mempo_learner', '--model', options.model, '--host', '127.0.0.1', '--port', '0', '--seed', String(options.seed ?? 0), '--device', options.device ?? 'auto', '--parent-pid', String(process.pid)];
  if (options.threads !== undefined) args.push('--threads', String(options.threads));
  // its other ranks are its children: they die with it, and it names one that dies in the answer it fails
  if (procs > 1) args.push('--nproc', String(procs));
  const env = { ...process.env, PYTHONPATH: [EMBEDDED.learner(), process.env['PYTHONPATH']].filter(Boolean).join(':'), PYTHONUNBUFFERED: '1' };
  const child = spawn(python, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let tail = '';
  let errBuf = '';
  child.stderr!.setEncoding('utf8').on('data', (s: string) => {
    tail = (tail + s).slice(-STDERR_TAIL);
    errBuf += s;
    const lines = errBuf.split('\n');
    errBuf = lines.pop()!;
    for (const l of lines) options.onLog?.(l);
  });
  const describe = (code: number | null, signal: NodeJS.Signals | null) =>
    `the learner (${python} -m mempo_learner --model ${options.model}${procs > 1 ? ` --nproc ${procs}` : ''}) exited (${signal ?? `code ${code}`})${tail.trim() ? `; its stderr ends:\n${tail.trim()}` : ''}`;
  let learner: SpawnedLearner | null = null;
  let onExit: (e: MempoError) => void = () => {};
  const exited = new Promise<void>((resolve) => {
    child.on('exit', (code, signal) => {
      const e = new MempoError('ERR_LEARNER', describe(code, signal));
      learner?.fail(e);
      onExit(e);
      resolve();
    });
  });
  const url = await new Promise<string>((resolve, reject) => {
    const timeout = options.startTimeoutMs ?? 120_000;
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new MempoError('ERR_LEARNER', `the learner did not start within ${timeout} ms${tail.trim() ? `; its stderr ends:\n${tail.trim()}` : ''}`));
    }, timeout);
    onExit = (e) => {
      clearTimeout(timer);
      reject(e);
    };
    child.on('error', (e) => {
      clearTimeout(timer);
      reject(new MempoError('ERR_LEARNER', `cannot start the learner with ${python}: ${e.message}`));
    });
    let out = '';
    child.stdout!.setEncoding('utf8').on('data', (s: string) => {
      out += s;
      const line = out.split('\n').find((l) => l.includes('"listening"'));
      if (line === undefined) return;
      try {
        const j = JSON.parse(line) as { url?: unknown };
        if (typeof j.url !== 'string') throw new Error('no url');
        clearTimeout(timer);
        resolve(j.url);
      } catch {
        clearTimeout(timer);
        child.kill('SIGKILL');
        reject(new MempoError('ERR_LEARNER', `the learner's start-up line is not {"event": "listening", "url": ...}: ${JSON.stringify(line)}`));
      }
    });
  });
  onExit = () => {};
  learner = new SpawnedLearner(url, options, child, exited);
  return learner;
}
