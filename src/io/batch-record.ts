/**
 * The zod schema of a batch.jsonl line (`BatchRecord`, docs/algorithm.md §8): `--resume` checks
 * every line it keeps against it before any work, so that a foreign or hand-edited line is an
 * error naming the line instead of a crash later in the summary or the report.
 */
import { z } from 'zod';
import type { DoneReason } from '../contracts';

const int0 = z.number().int().min(0);
// Token ids: the npz stores them as int32 (verl's int64 too, but a larger id is no token of any model).
const tokenId = int0.max(0x7fffffff, { message: 'is not a token id (above 2^31 - 1)' });
// Per-token floats: JSON writes a NaN (an advantage with --eps 0 over a uniform group) as null; read it back as NaN.
const nums = z.array(z.number().nullable().transform((v) => v ?? Number.NaN));
const DONE_REASONS = ['answer', 'max-turns', 'response-budget', 'round-length', 'eos', 'no-action', 'context', 'tool-error', 'backend-error'] as const satisfies readonly DoneReason[];

const roundSchema = z.object({
  index: z.number().int().min(1),
  start: int0,
  end: int0,
  memSpan: z.tuple([int0, int0]).nullable(),
  memReward: z.number().nullable(),
  pFull: z.number().nullable(),
  pMem: z.number().nullable(),
  action: z.enum(['search', 'access', 'answer']).nullable(),
  query: z.string().nullable(),
  url: z.string().optional(),
  page: z.number().int().min(1).optional(),
  reading: z.literal(true).optional(),
  answer: z.string().nullable(),
  violations: z.array(z.object({ code: z.string(), message: z.string() })),
  finishReason: z.string(),
  contextTokens: int0,
  contextIds: z.array(tokenId).optional(),
  observation: z.object({ start: int0, end: int0, truncated: z.boolean() }).nullable(),
});

export const batchRecordSchema = z
  .object({
    uid: z.string().min(1),
    sample: int0,
    question: z.string(),
    golds: z.array(z.string()),
    hops: z.number().int().nullable(),
    objectives: z.number().int().nullable(),
    promptIds: z.array(tokenId),
    responseIds: z.array(tokenId),
    responseMask: z.array(z.number().int().min(0).max(1)),
    oldLogp: nums.nullable(),
    rounds: z.array(roundSchema),
    score: z.number().nullable(),
    formatValid: z.boolean(),
    formatReason: z.string().nullable(),
    outcomeAdvantage: nums,
    memoryAdvantage: nums,
    advantages: nums,
    text: z.string(),
    doneReason: z.enum(DONE_REASONS).nullable(),
    error: z.string().nullable(),
    excluded: z.boolean(),
  })
  .superRefine((r, ctx) => {
    // Every per-token array is as long as the response (a cut or edited line is not).
    for (const k of ['responseMask', 'oldLogp', 'outcomeAdvantage', 'memoryAdvantage', 'advantages'] as const) {
      const a = r[k];
      if (a !== null && a.length !== r.responseIds.length) {
        ctx.addIssue({ code: 'custom', path: [k], message: `${a.length} values for ${r.responseIds.length} response tokens` });
      }
    }
  });
