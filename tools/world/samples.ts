/**
 * Per-round training samples from oracle trajectories, under both context policies
 * (docs/algorithm.md §1, §7), plus memory-reward-shaped samples (§4: promptIds + `<mem>…</mem>`
 * followed by `<answer>gold</answer>`). Tokenised with the shipped tokenizer through
 * @huggingface/transformers, so the ids are exactly what the runtime produces.
 */
import * as path from 'path';
import { ANSWER_CLOSE, ANSWER_OPEN, MEM_CLOSE, MEM_OPEN, SPECIAL_TOKENS, SpecialToken } from '../../src/protocol/tags';
import { SPECIAL_TOKEN_IDS } from '../../src/protocol/embedded-ids';
import { splitAnswers } from '../../src/protocol/answer';
import { SYSTEM_PROMPT, renderMemoryContext, renderPrompt } from '../../src/protocol/chat';
import { observationSegment, renderFullContext } from '../../src/protocol/stream';
import type { OracleTrajectory } from './oracle';

/**
 * `score`: the memory probe (promptIds + `<mem>…</mem>`), `score_full`: the full probe
 * (everything before the round), each followed by the answer target, for rounds ≥ 2 whose context
 * holds every part of the gold (docs/algorithm.md §4); `score_absent`: either probe where the
 * context lacks a part, so P stays low when the gold cannot be copied. The target's `<answer>` is
 * context, not output: the probe forces it where the agent writes `<mem>` (after an observation)
 * or `<think>` (after `</mem>`), and training the tag there teaches the agent to answer early.
 */
export type SamplePolicy = 'memory' | 'full' | 'score' | 'score_full' | 'score_absent';

/**
 * A whole `full`-policy trajectory as one sequence: context = promptIds, output = the
 * response stream; `outputMask` is 1 on generated round text and 0 on observation segments
 * (`response_mask`, docs/algorithm.md §1). Training on it equals training on every round's `full` context.
 */
export interface StreamSample {
  qid: string;
  context: string;
  pieces: { text: string; generated: boolean }[];
}

export function trajectoryStream(t: OracleTrajectory, systemPrompt: string = SYSTEM_PROMPT): StreamSample {
  const pieces: { text: string; generated: boolean }[] = [];
  for (const r of t.rounds) {
    pieces.push({ text: r.text, generated: true });
    if (r.observation !== undefined) pieces.push({ text: observationSegment(r.observation), generated: false });
  }
  return { qid: t.qid, context: renderPrompt(t.question, systemPrompt), pieces };
}

export interface TextSample {
  policy: SamplePolicy;
  qid: string;
  round: number; // 1-based
  context: string;
  output: string;
}

/** Every part of `gold` (one name, or a bundle's comma-separated names) occurs in `text`. */
export function holdsGold(text: string, gold: string): boolean {
  const parts = splitAnswers(gold);
  return parts.length > 0 && parts.every((p) => text.includes(p));
}

/** All samples of one trajectory, under the agent's system prompt (ACCESS_SYSTEM_PROMPT where it has pages). */
export function trajectorySamples(t: OracleTrajectory, systemPrompt: string = SYSTEM_PROMPT): TextSample[] {
  const out: TextSample[] = [];
  const texts = t.rounds.map((r) => r.text);
  const obs = t.rounds.map((r) => r.observation).filter((o): o is string => o !== undefined);
  const gold = t.golds[0] as string;
  const target = gold + ANSWER_CLOSE;
  t.rounds.forEach((r, i) => {
    const prev = t.rounds[i - 1];
    const memCtx = i === 0 || !prev
      ? renderPrompt(t.question, systemPrompt)
      : renderMemoryContext(t.question, prev.text, prev.observation ?? '', systemPrompt);
    out.push({ policy: 'memory', qid: t.qid, round: i + 1, context: memCtx, output: r.text });
    if (i === 0) return;
    const fullCtx = renderFullContext(t.question, texts.slice(0, i), obs.slice(0, i), systemPrompt);
    out.push({ policy: 'full', qid: t.qid, round: i + 1, context: fullCtx, output: r.text });
    // the two probes of the memory reward at this round's snapshot (docs/algorithm.md §2, §4)
    out.push({ policy: holdsGold(fullCtx, gold) ? 'score_full' : 'score_absent', qid: t.qid, round: i + 1, context: fullCtx + ANSWER_OPEN, output: target });
    const probe = renderPrompt(t.question, systemPrompt) + MEM_OPEN + r.mem + MEM_CLOSE;
    out.push({ policy: holdsGold(r.mem, gold) ? 'score' : 'score_absent', qid: t.qid, round: i + 1, context: probe + ANSWER_OPEN, output: target });
  });
  return out;
}

export interface Encoder {
  encode(text: string): number[];
}

interface HfTokenizer {
  encode(text: string, opts?: { add_special_tokens?: boolean }): number[];
  decode(ids: number[], opts?: object): string;
  apply_chat_template(messages: object[], opts: object): unknown;
}

/** Load @huggingface/transformers (CJS build when available, else dynamic import). */
export async function loadTransformers(): Promise<{
  AutoTokenizer: { from_pretrained(p: string, o?: object): Promise<HfTokenizer> };
  env: { allowRemoteModels: boolean; allowLocalModels: boolean; localModelPath: string };
}> {
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    return require('@huggingface/transformers');
  } catch {
    // eslint-disable-next-line no-new-func
    const dynImport = new Function('s', 'return import(s)') as (s: string) => Promise<never>;
    return dynImport('@huggingface/transformers');
  }
}

/** Load the shipped tokenizer from a local model directory, offline. */
export async function loadTokenizer(modelDir: string): Promise<HfTokenizer> {
  const tf = await loadTransformers();
  tf.env.allowRemoteModels = false;
  tf.env.allowLocalModels = true;
  const abs = path.resolve(modelDir);
  return tf.AutoTokenizer.from_pretrained(abs, { local_files_only: true });
}

const SPECIAL_RE = new RegExp(`(${SPECIAL_TOKENS.map((t) => t.replace(/[|<>/]/g, (c) => `\\${c}`)).join('|')})`);

/**
 * Encoder that splits at special tokens and caches the encoding of each text piece. Equal to
 * `tokenizer.encode(text, {add_special_tokens:false})` because the tokenizer splits at added
 * tokens before pre-tokenisation (checked in test/tools/world.test.ts).
 */
export function cachedEncoder(tok: HfTokenizer): Encoder {
  const cache = new Map<string, number[]>();
  return {
    encode(text: string): number[] {
      const ids: number[] = [];
      for (const piece of text.split(SPECIAL_RE)) {
        if (piece === '') continue;
        const sp = SPECIAL_TOKEN_IDS[piece as SpecialToken];
        if (sp !== undefined && (SPECIAL_TOKENS as readonly string[]).includes(piece)) {
          ids.push(sp);
          continue;
        }
        let c = cache.get(piece);
        if (!c) {
          c = Array.from(tok.encode(piece, { add_special_tokens: false }));
          if (cache.size > 200000) cache.clear();
          cache.set(piece, c);
        }
        for (const x of c) ids.push(x);
      }
      return ids;
    },
  };
}
