/**
 * Command-line flags of every pipeline option (docs/algorithm.md §1-§8), shared by `mempo rollout` and
 * `mempo eval`, with parsers that reject bad values naming the flag.
 */
import { Command, InvalidArgumentError, Option } from 'commander';
import { DEFAULTS, resolveOptions, type PipelineOptions } from '../options';
import { MempoError } from '../errors';
import { COMPLETIONS_APIS, type CompletionsApi } from '../engines/http/options';
import { isHttpUrl } from '../validate';
import { METRICS } from '../kernels/outcome-reward';

const D = resolveOptions({});

export function int(min: number): (v: string) => number {
  return (v: string) => {
    if (!/^-?\d+$/.test(v.trim())) throw new InvalidArgumentError(`Expected an integer >= ${min}.`);
    const n = Number(v);
    if (!Number.isSafeInteger(n) || n < min) throw new InvalidArgumentError(`Expected an integer >= ${min}.`);
    return n;
  };
}

export function num(check: (x: number) => boolean = Number.isFinite, what = 'a finite number'): (v: string) => number {
  return (v: string) => {
    const t = v.trim().toLowerCase();
    const n = t === '-inf' || t === '-infinity' ? -Infinity : t === 'inf' || t === 'infinity' ? Infinity : Number(t);
    if (t.length === 0 || Number.isNaN(n) || !check(n)) throw new InvalidArgumentError(`Expected ${what}.`);
    return n;
  };
}

/** A finite number >= 0. */
export const nonNeg = num((x) => x >= 0 && Number.isFinite(x), 'a finite number >= 0');

/** What a parsed 'none' becomes (commander turns a parsed null into ''); `orNull` maps it back. */
export const NONE = 'none';

/** A positive integer, or "none" for no limit. */
export function intOrNone(v: string): number | typeof NONE {
  return noneOr(int(1))(v);
}

/** A finite number, or 'none' (null). */
export function numOrNone(v: string): number | typeof NONE {
  return noneOr(num())(v);
}

function noneOr(parse: (v: string) => number): (v: string) => number | typeof NONE {
  return (v) => (/^(none|null|off)$/i.test(v.trim()) ? NONE : parse(v));
}

/** A flag value of `intOrNone` (or its default) as number | null. */
export function orNull(v: unknown): unknown {
  return v === NONE ? null : v;
}

/** A text flag that must say something (`--system-prompt ''` is a mistake, not a choice). */
export function nonEmptyText(v: string): string {
  if (v.trim().length === 0) throw new InvalidArgumentError('Expected a non-empty text.');
  return v;
}

export interface CommandDefaults {
  groupSize?: number;
  maxTurns?: number;
  maxResponseTokens?: number;
  temperature?: number;
  memoryReward?: boolean;
}

/** Adds every pipeline option to a command. */
export function addPipelineOptions(cmd: Command, defaults: CommandDefaults = {}): Command {
  const r = D.rollout;
  const m = D.memory;
  const add = (flags: string, desc: string, parse?: (v: string) => unknown, def?: unknown, choices?: readonly string[]) => {
    const o = new Option(flags, desc);
    if (choices) o.choices(choices);
    if (parse) o.argParser(parse as (v: string, p: unknown) => unknown);
    if (def !== undefined) o.default(def, def === null ? 'none' : undefined);
    cmd.addOption(o);
  };
  // Rollout (docs/algorithm.md §1-§2)
  add('-n, --group-size <n>', 'trajectories per question (group, shared uid)', int(1), defaults.groupSize ?? r.groupSize);
  add('--max-turns <n>', 'most rounds per trajectory', int(1), defaults.maxTurns ?? r.maxTurns);
  add('--max-response-tokens <n>', 'response token budget (generated + observation tokens)', int(1), defaults.maxResponseTokens ?? r.maxResponseTokens);
  add('--max-round-tokens <n>', 'most new tokens in one round', int(1), r.maxRoundTokens);
  add('--context <policy>', "context policy: 'full' (prompt + everything so far) or 'memory' (prepare_prompt window)", undefined, r.context, ['full', 'memory']);
  add('--system-prompt <text>', "the agent's system message (default: mempo's own, which names the page tool when the agent has it; recorded in run.json, a --resume must give the same)", nonEmptyText);
  add('--chat-template <which>', "[decided] chat rendering: 'model' (the tokenizer's own template; ChatML when it has none) or 'chatml' (mempo's plain ChatML)", undefined, r.chatTemplate, ['model', 'chatml']);
  add('--questions-per-batch <n>', 'questions rolled out and scored together (one scorer call per batch)', int(1), r.questionsPerBatch);
  add('--max-generate-batch <n>', 'most sequences per forward pass', int(1), r.maxGenerateBatch);
  add('--schedule <s>', "'batch' (a batch's groups together, the next batch once it is scored) or 'continuous' (a group joins as soon as the engine has room, scored as soon as it is done; not byte-identical to 'batch', see docs/rollout.md)", undefined, r.schedule, ['batch', 'continuous']);
  add('--max-in-flight <n>', "continuous schedule: most trajectories in flight (default: --max-generate-batch; more lets the engine sort each call into waves of similar length)", int(1));
  add('--seed <n>', 'sampling seed (the same seed reproduces the same batch)', int(0), r.seed);
  add('--temperature <t>', 'sampling temperature (0 = greedy)', num((x) => x >= 0 && Number.isFinite(x), 'a number >= 0'), defaults.temperature ?? r.sampling.temperature);
  add('--top-p <p>', 'nucleus sampling mass', num((x) => x > 0 && x <= 1, 'a number in (0, 1]'), r.sampling.topP);
  add('--top-k <k>', 'top-k sampling (0 = off)', int(0), r.sampling.topK);
  // Search tool
  add('--topk <k>', 'documents per search', int(1), D.tool.topk);
  add('--doc-max-chars <n>', "each document cut to this many characters ('none' keeps all)", intOrNone, D.tool.docMaxChars);
  add('--observation-format <f>', "[decided] observation text: 'mempo' (compact, what the embedded model reads) or 'asearcher' (ASearcher's [Doc k](url) and >>>> Page k >>>> blocks)", undefined, D.tool.observationFormat, ['mempo', 'asearcher']);
  add('--page-max-chars <n>', 'page tool (<access>, with --pages or a retrieval server with pages): a page is cut to this many characters', int(1), D.tool.pageMaxChars);
  add('--page-chunk-chars <n>', 'page tool: characters per chunk', int(1), D.tool.pageChunkChars);
  add('--page-max-chunks <n>', 'page tool: most chunks read of a page', int(1), D.tool.pageMaxChunks);
  add('--page-reading <how>', "[decided] page tool: 'cursor' (each access of a URL shows its next chunk) or 'queue' (ASearcher's: an access queues every chunk, each following round reads one and stops at </think>)", undefined, D.tool.pageReading, ['cursor', 'queue']);
  add('--retriever-timeout <ms>', 'HTTP retriever: per-request timeout', int(1), D.tool.timeoutMs);
  add('--retriever-retries <n>', 'HTTP retriever: retries after the first attempt', int(0), D.tool.retries);
  add('--retriever-backoff <ms>', 'HTTP retriever: first backoff, doubled per retry', int(0), D.tool.backoffMs);
  // Memory reward (docs/algorithm.md §4) and memory context (docs/algorithm.md §7)
  add('--mem-span <mode>', "[decided] mem span: 'inclusive' (with the tag tokens) or 'content'", undefined, m.memSpan, ['inclusive', 'content']);
  add('--answer-template <t>', 'memory-reward target; {answer} is replaced by the gold', undefined, m.answerTemplate);
  add('--target-tokenization <how>', "memory-reward target: 'apart' (prefix / gold / suffix tokenised separately) or 'whole' (gold tokens by character offsets)", undefined, m.targetTokenization, ['apart', 'whole']);
  add('--gold <which>', '[decided] gold used in the target when there are several', undefined, m.gold, ['first', 'shortest', 'longest']);
  add('--empty-kept <rule>', "[decided] P when no answer token passes the threshold: 'zero' or 'all-tokens' (plain geometric mean)", undefined, m.emptyKept, ['zero', 'all-tokens']);
  add('--threshold <tau>', "answer tokens with logp <= tau are dropped ('-inf' = plain geometric mean)", num((x) => x < Infinity && !Number.isNaN(x), "a number below Infinity or '-inf'"), m.threshold);
  add('--mem-context-last-observation', 'memory context also includes the previous observation (docs/algorithm.md §7)', undefined, m.memContextIncludesLastObservation);
  add('--window-tool-results <n>', 'prepare_prompt: tool results kept in the memory window', int(1), m.windowToolResults);
  add('--search-short-text-chars <n>', "prepare_prompt: shortText of search results ('none' = full text)", intOrNone, m.searchShortTextChars);
  add('--webpage-short-text-chars <n>', "prepare_prompt: shortText of webpages ('none' = full text)", intOrNone, m.webpageShortTextChars);
  add('--scorer-max-batch-tokens <n>', 'most padded tokens per scorer forward pass', int(1), m.scorerMaxBatchTokens);
  if (defaults.memoryReward === false) add('--memory-reward', 'compute memory rewards (off by default in eval)');
  else add('--no-memory-reward', 'skip memory rewards (outcome advantage only)');
  // Outcome reward (docs/algorithm.md §3) and advantages (docs/algorithm.md §5)
  add('--format-score <x>', 'score of a response with an invalid format', num(), D.reward.formatScore);
  add('--budget-score <x>', "score of a trajectory stopped by the response budget ('none': the format check decides)", numOrNone, D.reward.budgetScore ?? 'none');
  add('--metric <m>', 'outcome metric: em, f1 (token F1) or item-f1 (F1 over the comma-separated items)', undefined, D.reward.metric, METRICS);
  add('--require-answer', 'a response without an <answer> round has an invalid format');
  add('--eps <x>', 'added to the group std', nonNeg, D.advantage.eps);
  add('--no-norm-by-std', 'advantage = score - group mean (no division by the std)');
  add('--mem-grouping <g>', "memory-reward normalisation: per 'question' or per 'question-round'", undefined, D.advantage.memGrouping, ['question', 'question-round']);
  add('--alpha <x>', 'weight of the memory advantage in the final advantage', num(), D.advantage.alpha);
  add('--format-penalty <x>', "subtracted from the advantage of the round that broke the format (that round's tokens only)", nonNeg, D.advantage.formatPenalty);
  return cmd;
}

/** Commander's parsed flags → validated pipeline options. */
export function pipelineOptionsFromFlags(o: Record<string, unknown>, memoryRewardDefault = true): PipelineOptions {
  const memoryEnabled = o['memoryReward'] === undefined ? memoryRewardDefault : Boolean(o['memoryReward']);
  return resolveOptions({
    rollout: {
      groupSize: o['groupSize'], maxTurns: o['maxTurns'], maxResponseTokens: o['maxResponseTokens'], maxRoundTokens: o['maxRoundTokens'],
      context: o['context'], chatTemplate: o['chatTemplate'], systemPrompt: o['systemPrompt'], questionsPerBatch: o['questionsPerBatch'], maxGenerateBatch: o['maxGenerateBatch'], schedule: o['schedule'], maxInFlight: o['maxInFlight'] ?? null, seed: o['seed'],
      sampling: { temperature: o['temperature'], topP: o['topP'], topK: o['topK'] },
    },
    tool: {
      topk: o['topk'], docMaxChars: orNull(o['docMaxChars']), observationFormat: o['observationFormat'],
      pageMaxChars: o['pageMaxChars'], pageChunkChars: o['pageChunkChars'], pageMaxChunks: o['pageMaxChunks'], pageReading: o['pageReading'],
      timeoutMs: o['retrieverTimeout'], retries: o['retrieverRetries'], backoffMs: o['retrieverBackoff'],
    },
    memory: {
      memSpan: o['memSpan'], answerTemplate: o['answerTemplate'], targetTokenization: o['targetTokenization'], gold: o['gold'], emptyKept: o['emptyKept'], threshold: o['threshold'],
      memContextIncludesLastObservation: Boolean(o['memContextLastObservation']), windowToolResults: o['windowToolResults'],
      searchShortTextChars: orNull(o['searchShortTextChars']), webpageShortTextChars: orNull(o['webpageShortTextChars']),
      scorerMaxBatchTokens: o['scorerMaxBatchTokens'], enabled: memoryEnabled,
    },
    reward: { formatScore: o['formatScore'], budgetScore: orNull(o['budgetScore']), metric: o['metric'], requireAnswer: Boolean(o['requireAnswer']) },
    advantage: { eps: o['eps'], normByStd: o['normByStd'] !== false, memGrouping: o['memGrouping'], alpha: o['alpha'], formatPenalty: o['formatPenalty'] },
  });
}

/** How `mempo rollout` / `mempo eval` reach inference servers (`--server ...`); null = the local model. */
export interface ServerSettings {
  urls: string[];
  api: CompletionsApi;
  /** --server-model; null = what GET /v1/models reports, else the --model directory's name. */
  model: string | null;
  maxInFlight: number;
  timeoutMs: number;
  retries: number;
  backoffMs: number;
  scoreBatchSize: number;
  sendSeed: boolean;
}

export const SERVER_DEFAULTS = DEFAULTS.server;

/** `--server` values: repeatable, each a URL or a comma-separated list of them. */
export function serverUrlList(v: string, previous: unknown): string[] {
  const list = v.split(',').map((u) => u.trim()).filter((u) => u.length > 0);
  if (list.length === 0) throw new InvalidArgumentError('Expected an http(s) URL or a comma-separated list of them.');
  for (const u of list) {
    if (!isHttpUrl(u)) throw new InvalidArgumentError(`Expected an http(s) URL (e.g. http://127.0.0.1:8000), not ${JSON.stringify(u)}.`);
  }
  return [...(Array.isArray(previous) ? (previous as string[]) : []), ...list];
}

/** The inference-server flags of rollout and eval (no commander defaults: a flag given without --server is an error). */
export function addServerOptions(cmd: Command): Command {
  const d = SERVER_DEFAULTS;
  cmd
    .option('--server <url>', 'inference server(s) for generation AND memory-reward scoring (vLLM, SGLang or mempo serve); repeat the flag or comma-separate replicas. --model then provides only the tokenizer (tokenizer.json, tokenizer_config.json; config.json and generation_config.json when present)', serverUrlList)
    .addOption(new Option('--server-api <api>', `server dialect: 'vllm' (POST /v1/completions) or 'sglang' (POST /generate) (default: ${d.api})`).choices([...COMPLETIONS_APIS]))
    .option('--server-model <name>', "model name sent to and checked against the server (default: the first model GET /v1/models lists on the first --server, else the --model directory's name)")
    .option('--server-max-in-flight <n>', `most requests in flight per server (default: ${d.maxInFlight})`, int(1))
    .option('--server-timeout <ms>', `per-request timeout (default: ${d.timeoutMs})`, int(1))
    .option('--server-retries <n>', `retries of a failed request (429, 5xx, connection error, timeout), on the next server (default: ${d.retries})`, int(0))
    .option('--server-backoff <ms>', `wait before the first retry, doubled per retry (default: ${d.backoffMs})`, int(0))
    .option('--server-score-batch <n>', `memory-reward scoring items per request (default: ${d.scoreBatchSize})`, int(1))
    .option('--no-server-seed', 'send no per-request sampling seed (vLLM seed / SGLang sampling_seed) to servers that reject it');
  return cmd;
}

/** Commander's parsed server flags → settings (null without --server); a server flag without --server is an error naming it. */
export function serverSettingsFromFlags(o: Record<string, unknown>): ServerSettings | null {
  const urls = o['server'] as string[] | undefined;
  const given: [string, string][] = [
    ['serverApi', '--server-api'], ['serverModel', '--server-model'], ['serverMaxInFlight', '--server-max-in-flight'], ['serverTimeout', '--server-timeout'],
    ['serverRetries', '--server-retries'], ['serverBackoff', '--server-backoff'], ['serverScoreBatch', '--server-score-batch'],
  ];
  if (urls === undefined) {
    const stray = given.find(([k]) => o[k] !== undefined)?.[1] ?? (o['serverSeed'] === false ? '--no-server-seed' : undefined);
    if (stray !== undefined) throw new MempoError('ERR_INVALID_OPTION', `${stray} needs --server URL (the inference server to use)`);
    return null;
  }
  const d = SERVER_DEFAULTS;
  return {
    urls,
    api: (o['serverApi'] as CompletionsApi | undefined) ?? d.api,
    model: (o['serverModel'] as string | undefined) ?? null,
    maxInFlight: (o['serverMaxInFlight'] as number | undefined) ?? d.maxInFlight,
    timeoutMs: (o['serverTimeout'] as number | undefined) ?? d.timeoutMs,
    retries: (o['serverRetries'] as number | undefined) ?? d.retries,
    backoffMs: (o['serverBackoff'] as number | undefined) ?? d.backoffMs,
    scoreBatchSize: (o['serverScoreBatch'] as number | undefined) ?? d.scoreBatchSize,
    sendSeed: o['serverSeed'] !== false,
  };
}
