/**
 * The one round grammar (docs/algorithm.md §1): parseRoundOutput, validateFormat and parseRound
 * agree on every round text, on a hand-written table and on mutated rounds.
 */
import { validateFormat } from '../../src/kernels/outcome-reward';
import { checkRound, firstDeviation, lexTags } from '../../src/protocol/grammar';
import { parseRound, parseRoundOutput } from '../../src/protocol/round';
import { ROUND_CASES, verdict } from './round-cases';

describe('the three round readers', () => {
  test.each(ROUND_CASES.map((c) => [c.name, c] as const))('agree on %s', (_name, c) => {
    const p = parseRoundOutput(c.text);
    expect(p.violations.map((v) => v.code)).toEqual(c.codes);
    expect(validateFormat(c.text)).toEqual(verdict(c.reason));
    const loose = parseRound(c.text);
    expect([loose.mem, loose.think, loose.search, loose.answer]).toEqual(c.loose);
    // The strict reader sees the blocks the loose one does.
    expect(p.mem).toBe(loose.mem);
    expect(p.think).toBe(loose.think);
    if (p.action !== null) expect(p[p.action]).toBe(loose[p.action]!.trim());
  });

  test('an empty action is a violation for every reader, with the reason naming it', () => {
    for (const [text, code, reason] of [
      ['<mem>m</mem><think>t</think><search></search>', 'empty-query', 'round 1: the search query is empty'],
      ['<mem>m</mem><think>t</think><answer>\n </answer>', 'empty-answer', 'round 1: the answer is empty'],
    ] as const) {
      expect(parseRoundOutput(text).violations).toEqual([{ code, message: reason.slice('round 1: '.length) }]);
      expect(validateFormat(text)).toEqual(verdict(reason));
    }
  });
});

describe('lexTags', () => {
  test('finds the five protocol tags only; other markup is text', () => {
    expect(lexTags('<b>x</b><mem></information>').map((t) => [t.name, t.close, t.index, t.end])).toEqual([
      ['mem', false, 8, 13],
      ['information', true, 13, 27],
    ]);
  });
});

/** Deterministic LCG in [0, n). */
function rng(seed: number): (n: number) => number {
  let s = seed >>> 0;
  return (n) => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s % n;
  };
}

const PIECES = [
  '<mem>', '</mem>', '<think>', '</think>', '<search>', '</search>', '<answer>', '</answer>',
  '<information>', '</information>', 'x', ' ', '\n', '<b>', '',
];
const VALID = ['<mem>', 'm', '</mem>', '<think>', 't', '</think>', '<search>', 'q', '</search>'];
const STOPS = new Set(['</search>', '</answer>']);

/** A valid round with up to 4 random edits, cut after its first stop tag (where generation stops). */
function mutatedRound(next: (n: number) => number): string {
  const parts = [...VALID];
  if (next(2) === 0) parts.splice(6, 3, '<answer>', 'a', '</answer>');
  for (let e = next(5); e > 0; e--) {
    const at = next(parts.length + 1);
    const op = next(3);
    if (op === 0) parts.splice(at, 1);
    else if (op === 1) parts.splice(at, 0, PIECES[next(PIECES.length)]!);
    else parts[Math.min(at, parts.length - 1)] = PIECES[next(PIECES.length)]!;
  }
  const stop = parts.findIndex((p) => STOPS.has(p));
  return (stop < 0 ? parts : parts.slice(0, stop + 1)).join('');
}

describe('the grammar on mutated rounds', () => {
  const next = rng(20261201);
  const rounds = Array.from({ length: 3000 }, () => mutatedRound(next));

  test('validateFormat is valid exactly when parseRoundOutput finds no violation', () => {
    let valid = 0;
    for (const text of rounds) {
      const ok = parseRoundOutput(text).violations.length === 0;
      if (validateFormat(text).valid !== ok) throw new Error(`readers disagree on ${JSON.stringify(text)}`);
      if (ok) valid++;
    }
    // Both kinds are well represented.
    expect(valid).toBeGreaterThan(300);
    expect(valid).toBeLessThan(2700);
  });

  test('the left-to-right reason exists exactly when there is a violation', () => {
    for (const text of [...rounds, ...rounds.map((r) => `${r}<mem>`)]) {
      const ok = checkRound(text).violations.length === 0;
      const d = firstDeviation(text);
      if ((d === null) !== ok) throw new Error(`deviation ${JSON.stringify(d)} for ${JSON.stringify(text)}`);
      expect(checkRound(text).deviation).toBe(d);
    }
  });

  test('a response is valid exactly when its rounds are and only the last one answers', () => {
    const obs = '\n<information>Doc 1 (X): <search>fake</search> <answer>y</answer></information>\n';
    const stopped = rounds.filter((r) => STOPS.has(r.slice(r.lastIndexOf('<'))));
    for (let n = 0; n < 1500; n++) {
      const k = 1 + next(3);
      const picked = Array.from({ length: k }, () => stopped[next(stopped.length)]!);
      const text = picked.map((r) => (r.endsWith('</search>') ? r + obs : r)).join('');
      const expected = picked.every((r) => parseRoundOutput(r).violations.length === 0)
        && picked.slice(0, -1).every((r) => parseRoundOutput(r).action === 'search');
      if (validateFormat(text).valid !== expected) throw new Error(`validateFormat disagrees on ${JSON.stringify(text)}`);
    }
  });
});
