/**
 * Agent modules (`mempo rollout|train --agent FILE`, docs/agents.md): an ES module (.mjs, or .js
 * in a "type": "module" package) or CommonJS file the user names, exporting
 *
 *   agent(task, client) → Promise<result>    one run of the agent on a task (src/agents/collect.ts: AgentClient)
 *   reward(task, episode) → number           the run's outcome reward (episode: { id, result, calls })
 *   tasks?                                   the tasks to run: an array of { id, question, golds }, or a
 *                                            (sync or async) function returning one; else --questions
 *
 * Loading it runs the user's own code, which they asked for by naming the file; every export is
 * checked before any work, each fault a MempoError naming the file and the export.
 */
import { statSync } from 'node:fs';
import { extname, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { MempoError } from '../errors';
import type { AgentClient, AgentEpisode } from './collect';
import type { AgentTask } from './episode-records';

export interface AgentModule {
  /** The file, absolute. */
  file: string;
  agent: (task: AgentTask, client: AgentClient) => Promise<unknown>;
  reward: (task: AgentTask, episode: AgentEpisode) => number | Promise<number>;
  /** The module's own tasks (validated), or null when it exports none. */
  tasks: AgentTask[] | null;
}

const EXTENSIONS = new Set(['.mjs', '.js', '.cjs']);

// A native import() (tsc's CommonJS output would turn `import()` into require(), which cannot load an ES module on Node 20).
// eslint-disable-next-line no-new-func -- a fixed body, no text from outside: only the specifier is data
const nativeImport = new Function('specifier', 'return import(specifier)') as (specifier: string) => Promise<Record<string, unknown>>;

/** Checks one task of `where`: { id: non-empty string, question: string, golds: string[] }; ids unique. */
export function checkAgentTasks(value: unknown, where: string): AgentTask[] {
  if (!Array.isArray(value)) throw new MempoError('ERR_INVALID_INPUT', `${where}: expected an array of { id, question, golds } but received ${describe(value)}`);
  const seen = new Set<string>();
  return value.map((t: unknown, i) => {
    const o = t as Record<string, unknown> | null;
    if (o === null || typeof o !== 'object') throw new MempoError('ERR_INVALID_INPUT', `${where}[${i}]: expected an object { id, question, golds } but received ${describe(t)}`);
    if (typeof o['id'] !== 'string' || o['id'].length === 0) throw new MempoError('ERR_INVALID_INPUT', `${where}[${i}].id: expected a non-empty string but received ${describe(o['id'])}`);
    if (typeof o['question'] !== 'string') throw new MempoError('ERR_INVALID_INPUT', `${where}[${i}].question: expected a string but received ${describe(o['question'])}`);
    const golds = o['golds'] ?? [];
    if (!Array.isArray(golds) || golds.some((g) => typeof g !== 'string')) throw new MempoError('ERR_INVALID_INPUT', `${where}[${i}].golds: expected an array of strings but received ${describe(golds)}`);
    if (seen.has(o['id'])) throw new MempoError('ERR_INVALID_INPUT', `${where}[${i}].id: ${JSON.stringify(o['id'])} appears twice; each task is one GRPO group`);
    seen.add(o['id']);
    return { ...(o as object), id: o['id'], question: o['question'], golds: golds as string[] };
  });
}

function describe(v: unknown): string {
  if (v === undefined) return 'nothing (undefined)';
  if (v === null) return 'null';
  if (typeof v === 'function') return 'a function';
  if (Array.isArray(v)) return `an array of ${v.length}`;
  if (typeof v === 'object') return 'an object';
  return `${typeof v} ${JSON.stringify(v)?.slice(0, 60)}`;
}

/** Loads and checks the agent module `file` (relative to the working directory). */
export async function loadAgentModule(file: string): Promise<AgentModule> {
  if (file.trim().length === 0) throw new MempoError('ERR_INVALID_OPTION', '--agent: the agent module is an empty path');
  const abs = resolve(file);
  if (!EXTENSIONS.has(extname(abs))) throw new MempoError('ERR_INVALID_OPTION', `--agent ${file}: expected a JavaScript module (.mjs, .js or .cjs) but the file ends in ${JSON.stringify(extname(abs) || '(no extension)')}; compile TypeScript first`);
  let st;
  try {
    st = statSync(abs);
  } catch (err) {
    throw new MempoError('ERR_INVALID_INPUT', `--agent ${file}: cannot read the agent module (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
  }
  if (!st.isFile()) throw new MempoError('ERR_INVALID_INPUT', `--agent ${file}: not a regular file`);
  let ns: Record<string, unknown>;
  try {
    ns = await nativeImport(pathToFileURL(abs).href);
  } catch (err) {
    throw new MempoError('ERR_INVALID_INPUT', `--agent ${file}: the module failed to load: ${(err as Error).message}`);
  }
  // A CommonJS module's exports arrive as `default` (module.exports) besides the named ones Node finds.
  const def = ns['default'];
  const pick = (name: string): unknown => (ns[name] !== undefined ? ns[name] : def !== null && typeof def === 'object' ? (def as Record<string, unknown>)[name] : undefined);
  const agent = pick('agent');
  const reward = pick('reward');
  const need = (name: string, v: unknown, shape: string) => {
    if (typeof v !== 'function') throw new MempoError('ERR_INVALID_INPUT', `--agent ${file}: the export "${name}" must be ${shape} but it is ${describe(v)}`);
  };
  need('agent', agent, 'a function (task, client) => Promise<result>');
  need('reward', reward, 'a function (task, episode) => number');
  let tasks: AgentTask[] | null = null;
  const given = pick('tasks');
  if (given !== undefined) {
    let value: unknown = given;
    if (typeof given === 'function') {
      try {
        value = await (given as () => unknown)();
      } catch (err) {
        throw new MempoError('ERR_INVALID_INPUT', `--agent ${file}: the export "tasks" threw: ${(err as Error).message}`);
      }
    }
    tasks = checkAgentTasks(value, `--agent ${file}: the export "tasks"`);
    if (tasks.length === 0) throw new MempoError('ERR_INVALID_INPUT', `--agent ${file}: the export "tasks" holds no task`);
  }
  return { file: abs, agent: agent as AgentModule['agent'], reward: reward as AgentModule['reward'], tasks };
}
