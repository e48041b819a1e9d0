/**
 * `mempo serve`: loads the model and listens (src/servers/completions-server.ts). The token
 * (`--token`, else $MEMPO_SERVE_TOKEN) is checked against the address first, so that a bind off
 * loopback without one is refused before the model loads.
 */
import { readFileSync } from 'node:fs';
import type { Server } from 'node:http';
import { basename } from 'node:path';
import { MempoError } from '../errors';
import { LocalModel } from '../engines/local/local-model';
import { checkToken, requireTokenOffLoopback, SERVER_TOKEN_ENV } from '../servers/auth';
import { createCompletionsServer, listen } from '../servers/completions-server';
import { checkChatTemplate } from '../servers/chat-template';
import { boundThreads, checkManifest, checkModelConfig } from './inputs';
import type { RunIO } from './run-settings';
import { EpisodeLog } from './serve-record';

export interface Serving {
  server: Server;
  model: LocalModel;
  url: string;
  /** --record FILE: the episode log; `close` it after the server closed. */
  record?: EpisodeLog;
}

/** Starts serving with commander's `mempo serve` options; `env` supplies MEMPO_SERVE_TOKEN. */
export async function startServe(opts: Record<string, unknown>, io: RunIO, env: NodeJS.ProcessEnv = process.env): Promise<Serving> {
  const dir = opts['model'] as string;
  const host = opts['host'] as string;
  const token = checkToken((opts['token'] as string | undefined) ?? env[SERVER_TOKEN_ENV], opts['token'] !== undefined ? '--token' : SERVER_TOKEN_ENV);
  await requireTokenOffLoopback(host, token !== undefined);
  const warn = (m: string) => void io.stderr.write(`warning: ${m}\n`);
  const chatTemplate = readChatTemplate(opts['chatTemplate'] as string | undefined);
  const recordFile = opts['record'] as string | undefined;
  const record = recordFile === undefined ? undefined : new EpisodeLog(recordFile);
  checkModelConfig(dir);
  checkManifest(dir, warn);
  const given = opts['threads'] as number | undefined;
  const threads = given === undefined ? undefined : boundThreads(given, warn);
  const model = await LocalModel.load(dir, threads === undefined ? {} : { load: { sessionOptions: { intraOpNumThreads: threads, interOpNumThreads: 1 } } });
  const name = basename(dir.replace(/[\\/]+$/, ''));
  let server: Server;
  let url: string;
  try {
    server = createCompletionsServer(model, {
      modelName: name,
      maxConcurrency: opts['maxConcurrency'] as number,
      maxBodyBytes: opts['maxBody'] as number,
      ...(token === undefined ? {} : { token }),
      ...(chatTemplate === undefined ? {} : { chatTemplate }),
      ...(record === undefined ? {} : { recorder: record.recorder, onEpisodeFinished: record.onFinished }),
    });
    url = await listen(server, opts['port'] as number, host);
  } catch (err) {
    await model.dispose();
    record?.close({ write: () => true });
    throw err;
  }
  const auth = token === undefined ? '' : '; every request but GET /health needs Authorization: Bearer <token>';
  const rec = record === undefined ? '' : `; episodes tagged x-mempo-episode are appended to ${record.file} when POST /v1/episodes/{id}/finish`;
  io.stderr.write(`mempo serve: model "${name}" from ${dir}, listening on ${url} (POST /v1/chat/completions, POST /v1/completions, POST /generate${auth}${rec})\n`);
  return { server, model, url, ...(record === undefined ? {} : { record }) };
}

/** The text of --chat-template FILE, read before the model loads so that a wrong path fails fast. */
function readChatTemplate(file: string | undefined): string | undefined {
  if (file === undefined) return undefined;
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new MempoError('ERR_INVALID_OPTION', `--chat-template ${file}: cannot read it (${(err as Error).message})`);
  }
  checkChatTemplate(text, `--chat-template ${file}`);
  return text;
}
