import { computeScore, emCheck, extractSolution, f1Score, itemF1, normalizeAnswer, parseRoundOutput, validateFormat } from '../../src';
import { parseRound } from '../../src/protocol/round';
import { ROUND_CASES, verdict } from '../protocol/round-cases';

const round = (action: string) => `<mem> facts </mem><think> plan </think>${action}`;
const obs = '<information>Doc 1 (X): <b>raw</b> text with <answer>fake</answer></information>\n';

describe('extractSolution', () => {
  it('returns the trimmed content of the last answer', () => {
    expect(extractSolution('<answer> a </answer> x <answer>\n Paris \n</answer>')).toBe('Paris');
  });
  it('returns null without an answer and for an unclosed one', () => {
    expect(extractSolution('<think>no</think>')).toBeNull();
    expect(extractSolution('<answer>open')).toBeNull();
  });
  it('throws a TypeError naming the argument for a non-string', () => {
    expect(() => extractSolution(42 as unknown as string)).toThrow('Expected a string for text but received 42');
  });
});

describe('normalizeAnswer', () => {
  it('lowercases, drops punctuation and articles, collapses whitespace', () => {
    expect(normalizeAnswer('  The  Eiffel-Tower, an  Icon! ')).toBe('eiffeltower icon');
  });
  it('maps True/False to yes/no', () => {
    expect(normalizeAnswer('True')).toBe('yes');
    expect(normalizeAnswer(' false ')).toBe('no');
  });
  it('keeps article letters inside words', () => {
    expect(normalizeAnswer('Theatre anthem')).toBe('theatre anthem');
  });
});

describe('emCheck and f1Score', () => {
  it('matches any gold after normalisation', () => {
    expect(emCheck('the paris', ['London', 'Paris'])).toBe(1);
    expect(emCheck('Paris France', ['Paris'])).toBe(0);
    expect(emCheck(null, 'Paris')).toBe(0);
    expect(emCheck('yes', 'True')).toBe(1);
  });
  it('computes token F1 as the max over golds', () => {
    expect(f1Score('new york city', ['york', 'new york'])).toBeCloseTo(0.8, 10);
    expect(f1Score('a', ['b'])).toBe(0);
    expect(f1Score(null, ['b'])).toBe(0);
  });
  it('rejects empty or non-string golds', () => {
    expect(() => emCheck('x', [])).toThrow('Expected a string or a non-empty array of strings for golds');
    expect(() => f1Score('x', [1 as unknown as string])).toThrow(TypeError);
    expect(() => itemF1('x', [])).toThrow('Expected a string or a non-empty array of strings for golds');
    expect(() => itemF1(3 as unknown as string, 'x')).toThrow('Expected a string or null for pred');
  });
});

describe('itemF1', () => {
  it('is the EM of a one-item answer: a name half right earns nothing (token F1 gives it 0.5)', () => {
    expect(itemF1('Zamje Sethhan', ['Zamje Drokruth'])).toBe(0);
    expect(f1Score('Zamje Sethhan', ['Zamje Drokruth'])).toBeCloseTo(0.5, 10);
    expect(itemF1('the Zamje  Drokruth.', 'Zamje Drokruth')).toBe(1);
    expect(itemF1('True', 'yes')).toBe(1);
    expect(itemF1(null, 'x')).toBe(0);
  });
  it('scores the share of the items named exactly, in any order', () => {
    const gold = ['Zusje Studio, Geveim Press'];
    expect(itemF1('geveim press, Zusje Studio', gold)).toBe(1);
    // 1 of 1 predicted right, 1 of 2 golds named: P = 1, R = 1/2, F1 = 2/3
    expect(itemF1('Zusje Studio', gold)).toBeCloseTo(2 / 3, 10);
    // 2 of 3 predicted right, 2 of 2 named: P = 2/3, R = 1, F1 = 0.8
    expect(itemF1('Zusje Studio, Foo Bar, Geveim Press', gold)).toBeCloseTo(0.8, 10);
    // a half-right item counts as wrong: P = 1/2, R = 1/2
    expect(itemF1('Zusje Studio, Geveim Books', gold)).toBeCloseTo(0.5, 10);
    // a repeated item matches one gold item once
    expect(itemF1('Zusje Studio, Zusje Studio', gold)).toBeCloseTo(0.5, 10);
    expect(itemF1(' , ', gold)).toBe(0);
  });
  it('takes the best gold', () => {
    expect(itemF1('a1, b2', ['c3', 'a1, b2, d4'])).toBeCloseTo(0.8, 10);
  });
});

describe('validateFormat', () => {
  it('accepts search rounds with observations and a final answer round', () => {
    const resp = round('<search> q1 </search>') + obs + round('<search>q2</search>') + obs + round('<answer>x</answer>');
    expect(validateFormat(resp)).toEqual({ valid: true });
    expect(validateFormat(round('<search>q</search>'))).toEqual({ valid: true });
  });
  it('requires an answer round when asked', () => {
    expect(validateFormat(round('<search>q</search>'), { requireAnswer: true })).toEqual({
      valid: false,
      reason: 'round 1: the response ends without an <answer> round',
      round: 1,
    });
  });
  it.each([
    ['<think>t</think><search>q</search>', 'round 1: expected <mem> to open the round but found <think>'],
    ['<mem>m</mem><search>q</search>', 'round 1: expected <think> after </mem> but found <search>'],
    ['<mem>m</mem><think>t</think>', 'round 1: expected <search> or <answer> after </think> but the response ended'],
    ['<mem>m<think>t</think></mem>', 'round 1: <mem> is not closed before <think>'],
    ['<mem>m</mem> hi <think>t</think><answer>a</answer>', 'round 1: text outside tags before <think>'],
    ['<mem>m</mem><think>t</think><answer>a</answer> trailing', 'round 1: text outside tags at the end'],
    [round('<answer>a</answer>') + round('<answer>b</answer>'), 'round 2: text after the answer round'],
    [round('<search>q</search><search>r</search>'), 'round 2: expected <mem> to open the round but found <search>'],
    [round('<search>q</search>') + '<information>open', 'round 1: <information> is not closed'],
    ['', 'empty response: expected <mem> to open the round'],
    ['just text', 'no tags: expected <mem> to open the round'],
  ])('rejects %j', (resp, reason) => {
    expect(validateFormat(resp)).toEqual(verdict(reason));
  });
});

describe('validateFormat and the round parsers (one grammar)', () => {
  it.each(ROUND_CASES.map((c) => [c.name, c] as const))('agree on %s', (_name, c) => {
    expect(validateFormat(c.text)).toEqual(verdict(c.reason));
    expect(parseRoundOutput(c.text).violations.map((v) => v.code)).toEqual(c.codes);
    const loose = parseRound(c.text);
    expect([loose.mem, loose.think, loose.search, loose.answer]).toEqual(c.loose);
  });
  it('rejects an empty search query or answer in any round, naming it', () => {
    expect(validateFormat(round('<search>q</search>') + obs + round('<search>  </search>'))).toEqual({
      valid: false,
      reason: 'round 2: the search query is empty',
      round: 2,
    });
    expect(validateFormat(round('<answer></answer>'), { requireAnswer: true })).toEqual({
      valid: false,
      reason: 'round 1: the answer is empty',
      round: 1,
    });
  });
  it('reads tags inside an observation as tool output', () => {
    const fake = '<information><mem>x</mem><search></search></information>';
    expect(validateFormat(`${round('<search>q</search>')}\n${fake}\n${round('<answer>a</answer>')}`)).toEqual({ valid: true });
  });
});

describe('computeScore', () => {
  const good = round('<search>q</search>') + obs + round('<answer> Paris </answer>');
  it('is EM of the last answer when the format is valid', () => {
    expect(computeScore(good, ['paris'])).toBe(1);
    expect(computeScore(good, ['rome'])).toBe(0);
  });
  it('is formatScore when the format is invalid', () => {
    expect(computeScore('<answer>Paris</answer>', ['paris'])).toBe(0);
    expect(computeScore('<answer>Paris</answer>', ['paris'], { formatScore: 0.1 })).toBe(0.1);
  });
  it('is formatScore for an empty answer', () => {
    expect(computeScore(round('<answer> </answer>'), ['paris'], { formatScore: 0.1 })).toBe(0.1);
  });
  it('supports the f1 and item-f1 metrics', () => {
    expect(computeScore(good, ['paris france'], { metric: 'f1' })).toBeCloseTo(2 / 3, 10);
    expect(computeScore(good, ['paris france'], { metric: 'item-f1' })).toBe(0);
    expect(computeScore(good, ['Paris, Rome'], { metric: 'item-f1' })).toBeCloseTo(2 / 3, 10);
    expect(computeScore('<answer>Paris</answer>', ['Paris, Rome'], { metric: 'item-f1', formatScore: -1 })).toBe(-1);
  });
  it('rejects unknown options with a hint', () => {
    expect(() => computeScore(good, ['x'], { formatscore: 1 } as never)).toThrow(
      'Unknown option "formatscore" in opts: misspelled option "formatscore" should be "formatScore"',
    );
    expect(() => computeScore(good, ['x'], { metric: 'bleu' } as never)).toThrow(
      "Expected one of 'em', 'f1', 'item-f1' for opts.metric but received \"bleu\"",
    );
  });
});
