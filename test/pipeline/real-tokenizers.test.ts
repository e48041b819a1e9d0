/**
 * Scripted rollouts with the real Qwen3 and Llama 3 tokenizers (docs/algorithm.md §1, "Tags are
 * text"; §2 snapshots; §4 target; §7 memory policy): canned rounds encoded by the real tokenizer
 * and cut by the local engine's stop matcher (so the token that completes `</search>` may carry
 * `\n\n`), every trajectory well formed, mem spans and both snapshot contexts checked against the
 * byte-level character reference, and every round's context rebuilt from its record equal to
 * what the generator was sent, under both context policies.
 */
import type { RequestTag } from '../../src/contracts';
import { runPipeline } from '../../src/pipeline/pipeline';
import { runAgentLoop } from '../../src/pipeline/rollout';
import { answerTarget, buildSnapshots, memSpan } from '../../src/pipeline/snapshots';
import { roundContextIds } from '../../src/pipeline/batch';
import { resolveOptions } from '../../src/options';
import { ByteVocab, REAL_NAMES, REAL_TOKENIZERS, byteReference, realTokenizer } from '../protocol/real-tokenizers';
import { CannedGenerator, FakeRetriever, FakeScorer, Q1, Q2 } from './helpers';


/** Rounds whose tags meet merging neighbours; text after a stop string is cut by the matcher. */
function script(tag: RequestTag): string {
  const rounds = tag.sample === 0
    ? [
      '<mem>none</mem>\n<think>Find Mamek.</think>\n<search>Mamek country</search>\n\nignored',
      '<mem>Mamek is a city in Thersekle 日本😀.</mem><think>ok</think><answer>Thersekle</answer>\n<mem>',
    ]
    : [
      '<mem></mem><think>t</think><search>a</search>',
      '<mem>\nfirst\n</mem>\n\n<think>\n</think><search>b</search>',
      '<mem>x</mem><think>t</think>\n<answer>Thersekle</answer>',
    ];
  return rounds[tag.round - 1] ?? '<mem>late</mem><think>t</think><answer>none</answer>';
}

/** Reference mem spans of a round, from its tokens' bytes: tags found in the round's text by plain search. */
function refSpans(vocab: ByteVocab, ids: readonly number[]): { inclusive: [number, number]; content: [number, number] } | null {
  const ref = byteReference(vocab, ids);
  const open = ref.text.indexOf('<mem>');
  const close = open < 0 ? -1 : ref.text.indexOf('</mem>', open + 5);
  if (close < 0) return null;
  return { inclusive: ref.tokensOf(open, close + 6), content: ref.tokensOf(open + 5, close) };
}

const shift = (s: [number, number], d: number): [number, number] => [s[0] + d, s[1] + d];

describe.each(REAL_NAMES)('scripted rollouts on %s', (name) => {
  const vocab = new ByteVocab(REAL_TOKENIZERS[name]);

  test.each(['full', 'memory'] as const)('%s context: well-formed trajectories, mem spans and snapshots equal the character reference', async (context) => {
    const tok = await realTokenizer(name);
    const gen = new CannedGenerator(tok, script, -0.5);
    const options = resolveOptions({ rollout: { groupSize: 2, context, maxRoundTokens: 200 } });
    const { trajectories } = await runAgentLoop({ questions: [Q1, Q2], generator: gen, retriever: new FakeRetriever(), options });
    const contentOpts = resolveOptions({ ...options, memory: { ...options.memory, memSpan: 'content' } });
    const snaps = buildSnapshots(trajectories, tok, options);
    const contentSnaps = buildSnapshots(trajectories, tok, contentOpts);
    for (const t of trajectories) {
      expect([t.uid, t.sample, t.state, t.doneReason]).toEqual([t.uid, t.sample, 'done', 'answer']);
      expect(t.rounds).toHaveLength(t.sample === 0 ? 2 : 3);
      for (const r of t.rounds) {
        expect(r.violations).toEqual([]);
        const ids = t.responseIds.slice(r.start, r.end);
        // Ids kept as generated: the round's text is their decoding, nothing re-tokenised.
        expect(r.text).toBe(tok.decode(ids));
        const want = refSpans(vocab, ids);
        expect(want).not.toBeNull();
        expect(memSpan(r, 'inclusive')).toEqual(shift(want!.inclusive, r.start));
        expect(memSpan(r, 'content')).toEqual(shift(want!.content, r.start));
        if (r.index < 2) continue;
        const s = snaps.find((x) => x.trajectory === t && x.round === r.index)!;
        expect(s.fullContext).toEqual([...t.promptIds, ...t.responseIds.slice(0, r.start)]);
        // The memory context ends with the token that completes </mem>, in both span modes.
        const memEnd = r.start + want!.inclusive[1];
        expect(s.memContext).toEqual([...t.promptIds, ...t.responseIds.slice(r.start, memEnd)]);
        expect(tok.decode(s.memContext.slice(t.promptIds.length))).toMatch(/<\/mem>[^]*$/);
        const c = contentSnaps.find((x) => x.trajectory === t && x.round === r.index);
        if (want!.content[1] > want!.content[0]) expect(c!.memContext).toEqual(s.memContext);
        else expect(c).toBeUndefined();
      }
      // The completing token of </search> is kept whole (Qwen and Llama 3 write `>\n\n` as one token).
      expect(t.rounds[0]!.text.endsWith(t.sample === 0 ? '</search>\n\n' : '</search>')).toBe(true);
      expect(t.rounds[0]!.text).not.toContain('ignored');
    }
  });

  test.each(['full', 'memory'] as const)('%s context: roundContextIds(record, r) is what the generator was sent for round r', async (context) => {
    const tok = await realTokenizer(name);
    const gen = new CannedGenerator(tok, script, -0.5);
    const res = await runPipeline({ questions: [Q1, Q2], generator: gen, scorer: new FakeScorer(), retriever: new FakeRetriever(), options: { rollout: { groupSize: 2, context, maxRoundTokens: 200 } } });
    expect(gen.sent).toHaveLength(2 * (2 + 3));
    for (const rec of res.records) {
      expect(rec.excluded).toBe(false);
      expect(rec.formatValid).toBe(true);
      for (const r of rec.rounds) {
        const sent = gen.sent.find((x) => x.tag.uid === rec.uid && x.tag.sample === rec.sample && x.tag.round === r.index)!;
        expect(roundContextIds(rec, r.index)).toEqual(sent.ids);
        expect(r.contextTokens).toBe(sent.ids.length);
        expect('contextIds' in r).toBe(context === 'memory');
        expect(r.memReward === null).toBe(r.index < 2 || r.memSpan === null);
      }
    }
    expect(() => roundContextIds(res.records[0]!, 9)).toThrow('round 9 is not a round of q1 sample 0 (2 rounds)');
  });

  test('reward target: tokenised apart (exact mask) or whole (gold tokens by character offsets)', async () => {
    const tok = await realTokenizer(name);
    for (const [template, gold] of [['<answer>{answer}</answer>', 'Thersekle'], ['<answer>{answer}</answer>', 'x'], ['Answer: {answer}.', '日本😀'], ['<answer>{answer}</answer>', '']] as const) {
      const [prefix, suffix] = template.split('{answer}') as [string, string];
      const apart = answerTarget(gold, template, tok);
      const a = prefix.length ? tok.encode(prefix) : [];
      const g = tok.encode(gold);
      expect(apart.targetIds).toEqual([...a, ...g, ...(suffix.length ? tok.encode(suffix) : [])]);
      expect(Array.from(apart.ansMask)).toEqual(apart.targetIds.map((_, k) => (k >= a.length && k < a.length + g.length ? 1 : 0)));
      const whole = answerTarget(gold, template, tok, 'whole');
      expect(whole.targetIds).toEqual(tok.encode(prefix + gold + suffix));
      const [s, e] = byteReference(vocab, whole.targetIds).tokensOf(prefix.length, prefix.length + gold.length);
      expect(Array.from(whole.ansMask)).toEqual(whole.targetIds.map((_, k) => (k >= s && k < e ? 1 : 0)));
      expect(tok.decode(whole.targetIds.filter((_, k) => whole.ansMask[k] === 1))).toContain(gold);
    }
    // `>x` is one token in both tokenizers: it straddles the gold's edge and is in the mask.
    const t = answerTarget('x', '<answer>{answer}</answer>', tok, 'whole');
    expect(t.targetIds.filter((_, k) => t.ansMask[k] === 1).map((id) => tok.piece(id))).toEqual(['>x']);
  });
});
