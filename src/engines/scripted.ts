/**
 * A scripted `Generator`: the text of every round comes from a function of (uid, sample,
 * round), so tests (and users debugging a pipeline) can drive the agent state machine with
 * exact, malformed or truncated model outputs. Stop strings and token budgets behave like the
 * real runtime: output is cut after the first stop string, or at maxNewTokens ('length').
 */
import type { GenerateParams, GenerationOutput, GenerationRequest, Generator, RequestTag, TextCodec } from '../contracts';

export type ScriptFn = (tag: RequestTag, contextIds: readonly number[]) => string | { text: string; finishReason?: 'eos' };

export class ScriptedGenerator implements Generator {
  /** Every request received, in order (for assertions). */
  readonly calls: Array<{ requests: GenerationRequest[]; params: GenerateParams }> = [];

  constructor(
    readonly codec: TextCodec,
    private readonly script: ScriptFn,
    readonly maxContextTokens = 2048,
    /** Log-prob reported for every token (default -0.25). */
    private readonly logprob = -0.25,
  ) {}

  generate(requests: readonly GenerationRequest[], params: GenerateParams): Promise<GenerationOutput[]> {
    this.calls.push({ requests: requests.slice(), params });
    return Promise.resolve(requests.map((req) => {
      const out = this.script(req.tag, req.ids);
      let text = typeof out === 'string' ? out : out.text;
      let finishReason: GenerationOutput['finishReason'] = typeof out === 'string' ? 'length' : (out.finishReason ?? 'length');
      let cut = -1;
      for (const s of params.stop) {
        const i = text.indexOf(s);
        if (i >= 0 && (cut < 0 || i + s.length < cut)) cut = i + s.length;
      }
      if (cut >= 0) {
        text = text.slice(0, cut);
        finishReason = 'stop';
      }
      let ids = this.codec.encode(text);
      if (ids.length > req.maxNewTokens) {
        ids = ids.slice(0, req.maxNewTokens);
        finishReason = 'length';
      }
      return { tokenIds: ids, logprobs: new Float32Array(ids.length).fill(this.logprob), finishReason };
    }));
  }
}
