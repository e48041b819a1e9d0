// The pipeline with your own model behind mempo's two engine interfaces: a `Generator` (batched
// sampling with stop strings and per-token log-probs) and a `TargetScorer` (teacher-forced
// log-probs of target tokens, for the memory reward), here both implemented over an
// OpenAI-compatible completions server with token-id prompts (vLLM's POST /v1/completions, or
// `mempo serve`). Swap the two fetch calls for your own model and nothing else changes.
//
// Run:  npx mempo serve --port 8001 &                      (or vLLM serving the same model)
//       npx tsc --module nodenext --target es2022 --strict --outDir build examples/own-engine.ts
//       node build/own-engine.js http://127.0.0.1:8001 [TOKENIZER_DIR]
// (as an ES module: "type": "module" in your package.json, or name the file own-engine.mts)
import {
  EMBEDDED, Tokenizer, Bm25Retriever, readQuestions, runPipeline,
  type Generator, type TargetScorer, type TextCodec, type GenerationRequest, type GenerateParams, type GenerationOutput, type ScoringItem,
} from 'mempo';

/** The parts of a vLLM completions answer read here (vllm/entrypoints/openai/protocol.py). */
interface Choice {
  index: number;
  token_ids: number[] | null;
  logprobs: { token_logprobs: number[] } | null;
  finish_reason: 'stop' | 'length' | null;
  prompt_logprobs: (Record<string, { logprob: number }> | null)[] | null;
}

class CompletionsEngine implements Generator, TargetScorer {
  private constructor(
    private readonly url: string,
    private readonly model: string,
    readonly codec: TextCodec,
    readonly maxContextTokens: number,
  ) {}

  /** The served model and its context length from GET /v1/models; the codec is the model's own tokenizer. */
  static async connect(url: string, tokenizerDir: string): Promise<CompletionsEngine> {
    const res = await fetch(`${url}/v1/models`);
    if (!res.ok) throw new Error(`${url}/v1/models: HTTP ${res.status}`);
    const card = ((await res.json()) as { data: { id: string; max_model_len: number }[] }).data[0];
    if (!card) throw new Error(`${url}/v1/models lists no model`);
    return new CompletionsEngine(url, card.id, await Tokenizer.load(tokenizerDir), card.max_model_len);
  }

  private async complete(body: Record<string, unknown>, prompts: number): Promise<Choice[]> {
    const res = await fetch(`${this.url}/v1/completions`, {
      method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: this.model, ...body }),
    });
    if (!res.ok) throw new Error(`${this.url}/v1/completions: HTTP ${res.status}: ${await res.text()}`);
    const choices = ((await res.json()) as { choices: Choice[] }).choices;
    if (choices.length !== prompts) throw new Error(`${this.url}/v1/completions: ${choices.length} choices for ${prompts} prompts`);
    return [...choices].sort((a, b) => a.index - b.index);
  }

  /** One request per trajectory, all in flight together; a stop string stays in the output, as the protocol needs. */
  generate(requests: readonly GenerationRequest[], params: GenerateParams): Promise<GenerationOutput[]> {
    return Promise.all(requests.map(async (r, i): Promise<GenerationOutput> => {
      const [c] = await this.complete({
        prompt: [...r.ids], max_tokens: r.maxNewTokens,
        temperature: params.temperature, top_p: params.topP, top_k: params.topK > 0 ? params.topK : -1,
        seed: (params.seed + i) >>> 0,                         // a seed of its own per request: reproducible runs
        stop: [...params.stop], include_stop_str_in_output: true, skip_special_tokens: false,
        logprobs: 0, return_token_ids: true,
      }, 1);
      const ids = c!.token_ids ?? [];
      const last = ids[ids.length - 1];
      const finishReason = c!.finish_reason !== 'stop' ? 'length' : last === this.codec.eosTokenId ? 'eos' : 'stop';
      return { tokenIds: ids, logprobs: Float32Array.from(c!.logprobs?.token_logprobs ?? []), finishReason };
    }));
  }

  /**
   * log π(target_t | context, target_<t) of every item: context + target sent as one prompt with
   * prompt_logprobs, 8 items per request; a context too long for the model loses its first tokens.
   */
  async score(items: readonly ScoringItem[]): Promise<Float32Array[]> {
    const out: Float32Array[] = [];
    for (let k = 0; k < items.length; k += 8) {
      const group = items.slice(k, k + 8).map((it) => {
        const ctx = it.contextIds.slice(Math.max(0, it.contextIds.length + it.targetIds.length - (this.maxContextTokens - 1)));
        return { prompt: [...ctx, ...it.targetIds], ctx: ctx.length, target: it.targetIds };
      });
      const choices = await this.complete({ prompt: group.map((g) => g.prompt), max_tokens: 1, temperature: 1, prompt_logprobs: 0 }, group.length);
      group.forEach((g, n) => {
        const pl = choices[n]!.prompt_logprobs ?? [];
        out.push(Float32Array.from(g.target, (id, t) => {
          const lp = pl[g.ctx + t]?.[String(id)]?.logprob;
          if (typeof lp !== 'number') throw new Error(`${this.url}/v1/completions: no prompt log-prob for token ${id} of scoring item ${k + n}`);
          return lp;
        }));
      });
    }
    return out;
  }
}

const url = (process.argv[2] ?? 'http://127.0.0.1:8001').replace(/\/+$/, '');
const engine = await CompletionsEngine.connect(url, process.argv[3] ?? EMBEDDED.model());
const { records, stats } = await runPipeline({
  questions: readQuestions(EMBEDDED.split('dev')).slice(0, 2),
  generator: engine, scorer: engine,
  retriever: Bm25Retriever.fromJsonl(EMBEDDED.corpus()),
  options: { rollout: { groupSize: 4 } },
});
const memRewards = records.flatMap((r) => r.rounds.map((rd) => rd.memReward)).filter((x): x is number => x !== null);
console.log(`${records.length} trajectories from ${url}: scores ${records.map((r) => r.score).join(' ')}; ` +
  `${memRewards.length} memory rewards (mean ${(memRewards.reduce((a, x) => a + x, 0) / Math.max(1, memRewards.length)).toFixed(3)}), ` +
  `${stats.scorerCalls} scorer call, ${stats.rounds} rounds`);
