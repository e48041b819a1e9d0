/** resolveProtocolIds (docs/algorithm.md §1): the protocol's ids from a tokenizer and a model config. */
import { resolve } from 'node:path';
import { Tokenizer } from '../../src/engines/local/tokenizer';
import { locateModelFiles, readModelConfig } from '../../src/engines/local/model-dir';
import {
  EOS_TOKEN_ID, FALLBACK_STOP_TOKEN_IDS, IM_END_ID, PAD_TOKEN_ID, SPECIAL_TOKEN_IDS, STOP_TOKEN_IDS,
} from '../../src/protocol/embedded-ids';
import { resolveProtocolIds } from '../../src/protocol/special-ids';

const MODEL_DIR = resolve(__dirname, '..', '..', 'models', 'mempo-tiny');

describe('resolveProtocolIds on the embedded tokenizer (models/mempo-tiny)', () => {
  let tok: Tokenizer;
  beforeAll(async () => {
    tok = await Tokenizer.load(MODEL_DIR);
  });

  test('with the model config it resolves the embedded constants', () => {
    const ids = resolveProtocolIds(tok, readModelConfig(locateModelFiles(MODEL_DIR)));
    expect(ids.eosTokenId).toBe(EOS_TOKEN_ID);
    expect(ids.padTokenId).toBe(PAD_TOKEN_ID);
    expect(ids.endOfTurnIds).toEqual([IM_END_ID]);
    expect(ids.endOfRoundIds).toEqual([...FALLBACK_STOP_TOKEN_IDS]);
    expect(ids.stopTokenIds).toEqual([...STOP_TOKEN_IDS]);
    expect(ids.stopTagIds).toEqual({ '</search>': STOP_TOKEN_IDS[0], '</answer>': STOP_TOKEN_IDS[1] });
    // generation_config.json lists <|im_end|> as a second eos.
    expect(ids.eosTokenIds).toEqual([EOS_TOKEN_ID, IM_END_ID]);
    for (const [tag, id] of Object.entries(ids.tagIds)) expect(id).toBe(SPECIAL_TOKEN_IDS[tag as keyof typeof SPECIAL_TOKEN_IDS]);
  });

  test('without a config it falls back on the tokenizer: same eos, pad and end-of-round ids', () => {
    const ids = resolveProtocolIds(tok);
    expect(ids.eosTokenIds).toEqual([EOS_TOKEN_ID]);
    expect(ids.padTokenId).toBe(PAD_TOKEN_ID);
    expect(ids.endOfRoundIds).toEqual([...FALLBACK_STOP_TOKEN_IDS]);
    expect(ids.stopTokenIds).toEqual([...STOP_TOKEN_IDS]);
  });
});

/** A codec with the given single-token vocabulary (anything else is several tokens). */
function codec(vocab: Record<string, number>, extra: { eosTokenId?: number; padTokenId?: number } = {}) {
  return { tokenId: (t: string) => vocab[t], ...extra };
}

describe('resolveProtocolIds on other tokenizers', () => {
  test('tags that are not single tokens resolve to undefined and no stop id', () => {
    const ids = resolveProtocolIds(codec({ '<|eot_id|>': 128009, '<|end_of_text|>': 128001 }), { eosTokenIds: [128001, 128009] });
    expect(ids.stopTagIds).toEqual({ '</search>': undefined, '</answer>': undefined });
    expect(ids.stopTokenIds).toEqual([]);
    expect(ids.tagIds['<mem>']).toBeUndefined();
    expect(ids.endOfTurnIds).toEqual([128009]);
    expect(ids.endOfRoundIds).toEqual([128001, 128009]);
    expect(ids.padTokenId).toBe(128001);
  });

  test('the config wins over the tokenizer; one single-token stop tag is kept alone', () => {
    const ids = resolveProtocolIds(
      codec({ '</answer>': 40, '<|im_end|>': 7 }, { eosTokenId: 5, padTokenId: 6 }),
      { eosTokenIds: [9, 9, 3], padTokenId: 4 },
    );
    expect(ids.eosTokenIds).toEqual([9, 3]);
    expect(ids.eosTokenId).toBe(9);
    expect(ids.padTokenId).toBe(4);
    expect(ids.stopTagIds).toEqual({ '</search>': undefined, '</answer>': 40 });
    expect(ids.stopTokenIds).toEqual([40]);
    expect(ids.endOfRoundIds).toEqual([9, 3, 7]);
  });

  test('nothing known: empty lists and undefined ids', () => {
    const ids = resolveProtocolIds(codec({}));
    expect(ids).toMatchObject({ eosTokenIds: [], eosTokenId: undefined, padTokenId: undefined, endOfTurnIds: [], endOfRoundIds: [], stopTokenIds: [] });
  });
});
