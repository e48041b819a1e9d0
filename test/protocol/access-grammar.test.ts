/**
 * The page tool in the one round grammar (docs/algorithm.md §1, §3): `<access>URL</access>` is an
 * action of an agent with pages (ACCESS_GRAMMAR), text for one without (SEARCH_GRAMMAR, the
 * default), and every reader (per-round violations, validateFormat, the loose parser) agrees.
 */
import { ACCESS_GRAMMAR, checkRound, firstDeviation, SEARCH_GRAMMAR } from '../../src/protocol/grammar';
import { parseRound, parseRoundOutput, renderRound } from '../../src/protocol/round';
import { computeScore, validateFormat } from '../../src/kernels/outcome-reward';
import { STOP_STRINGS } from '../../src/protocol/tags';

const ACCESS = '<mem>none</mem><think>Open it.</think><access>https://world.wiki/Mamek</access>';
const PAGE = '\n<information>Page 1 of 2 (https://world.wiki/Mamek): Mamek is a city.</information>\n';
const ANSWER = '<mem>Mamek is in Thersekle.</mem><think>Done.</think><answer>Thersekle</answer>';

describe('<access> in the round grammar', () => {
  test('an access round is valid with the page tool, and renderRound writes it', () => {
    expect(renderRound('none', 'Open it.', { kind: 'access', url: 'https://world.wiki/Mamek' })).toBe(ACCESS);
    const p = parseRoundOutput(ACCESS, ACCESS_GRAMMAR);
    expect(p).toEqual({ mem: 'none', think: 'Open it.', search: null, access: 'https://world.wiki/Mamek', answer: null, action: 'access', violations: [] });
    expect(parseRound(` ${ACCESS}`, ACCESS_GRAMMAR).access).toBe('https://world.wiki/Mamek');
  });

  test('without the page tool <access> is text: the round has no action, as before the tool existed', () => {
    const p = parseRoundOutput(ACCESS, SEARCH_GRAMMAR);
    expect(p.action).toBeNull();
    expect(p.access).toBeNull();
    expect(p.violations.map((v) => v.code)).toEqual(['text-outside-tags', 'no-action']);
    expect(checkRound(ACCESS).deviation).toBe('expected <search> or <answer> after </think> but the response ended');
    expect(checkRound('<mem>a</mem><think>b</think>', ACCESS_GRAMMAR).deviation).toBe('expected <search> or <access> or <answer> after </think> but the response ended');
  });

  test('an empty URL, two actions and a wrong order are violations of the round', () => {
    expect(parseRoundOutput('<mem>a</mem><think>b</think><access>  </access>', ACCESS_GRAMMAR).violations).toEqual([{ code: 'empty-url', message: 'the access URL is empty' }]);
    expect(firstDeviation('<mem>a</mem><think>b</think><access> </access>', ACCESS_GRAMMAR)).toBe('the access URL is empty');
    const two = parseRoundOutput('<mem>a</mem><think>b</think><access>u</access><search>q</search>', ACCESS_GRAMMAR);
    expect(two.action).toBe('access');
    expect(two.violations.map((v) => v.code)).toEqual(['two-actions']);
    expect(checkRound('<mem>a</mem><think>b</think><access>u</access><search>q</search>', ACCESS_GRAMMAR).deviation).toBe('<search> after the round\'s action');
    const order = parseRoundOutput('<mem>a</mem><access>u</access><think>b</think>', ACCESS_GRAMMAR);
    expect(order.violations.find((v) => v.code === 'tag-order')?.message).toBe('tags in the order <mem>, <access>, <think>; expected <mem>, <think>, then <search> or <access> or <answer>');
  });

  test('validateFormat: an access round followed by its page observation, then an answer', () => {
    const response = `${ACCESS}${PAGE}${ANSWER}`;
    expect(validateFormat(response, { access: true })).toEqual({ valid: true });
    expect(validateFormat(response)).toEqual({ valid: false, reason: 'round 1: text outside tags before <information>', round: 1 });
    expect(computeScore(response, ['Thersekle'], { access: true })).toBe(1);
    expect(computeScore(response, ['Thersekle'])).toBe(0);
    // A page's text is tool output: tags inside it are not read.
    expect(validateFormat(`${ACCESS}\n<information>Page 1 of 1 (u): <answer>x</answer> <search></information>\n${ANSWER}`, { access: true })).toEqual({ valid: true });
    expect(validateFormat(`${ACCESS}${PAGE}`, { access: true, requireAnswer: true })).toEqual({ valid: false, reason: 'round 1: the response ends without an <answer> round', round: 1 });
    expect(() => validateFormat(response, { access: 'yes' as unknown as boolean })).toThrow(/opts\.access/);
  });

  test('generation stops at </access> as at ASearcher (</search>, </access>, </answer>)', () => {
    expect(STOP_STRINGS).toEqual(['</search>', '</access>', '</answer>']);
  });
});
