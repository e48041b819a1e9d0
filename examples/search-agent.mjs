// A search agent of your own, written with the `openai` SDK, that mempo trains (docs/agents.md):
//
//   mempo rollout --agent examples/search-agent.mjs --out runs/agent -n 4 --limit 8
//   mempo train   --agent examples/search-agent.mjs --out runs/agent-train --steps 2
//
// It follows mempo's built-in protocol (docs/algorithm.md §1-§2, the `full` context): the system
// prompt and question in the model's chat template, then rounds of `<mem>…</mem><think>…</think>`
// and `<search>query</search>` or `<answer>…</answer>`; after a search its own tool function (BM25
// over the embedded corpus) answers, and the next round continues the same token stream:
// prompt + every earlier round + "\n" + observation + "\n". It talks to the endpoint in token ids
// (a prompt of ids, `return_token_ids`), so nothing it sends is a re-tokenization of text the
// model sampled. With `seed: client.seedFor(round)` it samples what the built-in agent samples
// under `--schedule continuous --max-generate-batch 1` with the same seed, token for token
// (test/agents/agent-example.test.ts).
//
// Run alone (a server of your own): MEMPO_URL=http://127.0.0.1:8000/v1 node examples/search-agent.mjs
import OpenAI from 'openai';
import { Bm25Retriever, EMBEDDED, SYSTEM_PROMPT, Tokenizer, STOP_STRINGS, emCheck, observationSegment, parseRoundOutput, readQuestions, renderSearchObservation, resolveOptions } from 'mempo';

// The built-in agent's settings (mempo rollout's defaults): rounds, budgets, sampling, the search tool.
const { rollout: R, tool: T } = resolveOptions({});
const tokenizer = await Tokenizer.load(EMBEDDED.model());
const corpus = Bm25Retriever.fromJsonl(EMBEDDED.corpus());

/** The agent's tool: the top documents for a query, rendered as the built-in search tool renders them. */
async function search(query) {
  if (query.length === 0) return renderSearchObservation([], { format: T.observationFormat });
  const [docs] = await corpus.search([query], T.topk);
  return renderSearchObservation(docs, { docMaxChars: T.docMaxChars, format: T.observationFormat });
}

/** Its tasks when `--questions` / `--split` are not given: the first 8 training questions. */
export const tasks = () => readQuestions(EMBEDDED.split('train')).slice(0, 8);

/**
 * One episode: rounds until an answer, the turn limit or the response budget. Returns what it
 * did; the endpoint recorded every call under `client.headers` (x-mempo-episode).
 */
export async function agent(task, client) {
  const openai = new OpenAI({ baseURL: client.baseURL, apiKey: client.apiKey, defaultHeaders: client.headers, maxRetries: 0 });
  const promptIds = tokenizer.encode(tokenizer.renderChat([{ role: 'system', content: SYSTEM_PROMPT }, { role: 'user', content: task.question }], { addGenerationPrompt: true }));
  const response = []; // every id after the prompt: sampled rounds and observations
  const calls = [];
  let answer = null;
  for (let round = 1; round <= R.maxTurns; round++) {
    const context = [...promptIds, ...response];
    const budget = Math.min(R.maxRoundTokens, R.maxResponseTokens - response.length, (client.maxContextTokens ?? Infinity) - context.length);
    if (budget <= 0) break;
    // Extra fields (top_k, return_token_ids) go in the body as vLLM takes them.
    const c = await openai.completions.create({
      model: client.model, prompt: context, max_tokens: budget, stop: [...STOP_STRINGS],
      temperature: R.sampling.temperature, top_p: R.sampling.topP, top_k: R.sampling.topK,
      seed: client.seedFor(round), logprobs: 0, return_token_ids: true,
    });
    const choice = c.choices[0];
    const sampled = choice.token_ids;
    calls.push({ promptIds: context, sampledIds: sampled, logprobs: choice.logprobs.token_logprobs });
    response.push(...sampled);
    const parsed = parseRoundOutput(choice.text);
    if (parsed.action === 'answer') {
      answer = parsed.answer;
      break;
    }
    if (parsed.action !== 'search' || round === R.maxTurns) break;
    // The observation, cut to what is left of the response budget, continues the stream.
    const obs = tokenizer.encode(observationSegment(await search(parsed.search)));
    response.push(...obs.slice(0, Math.max(0, R.maxResponseTokens - response.length)));
    if (response.length >= R.maxResponseTokens) break;
  }
  return { answer, calls };
}

/** Exact match of the answer against the task's golds (the built-in outcome reward without its format check). */
export function reward(task, episode) {
  return episode.result.answer !== null && emCheck(episode.result.answer, task.golds) ? 1 : 0;
}

// `node examples/search-agent.mjs`: one episode against MEMPO_URL (a `mempo serve`), printed.
if (import.meta.url === `file://${process.argv[1]}`) {
  const baseURL = process.env.MEMPO_URL ?? 'http://127.0.0.1:8000/v1';
  const [task] = tasks();
  const out = await agent(task, { baseURL, apiKey: process.env.MEMPO_TOKEN ?? 'none', model: 'mempo-tiny', headers: {}, sample: 0, seedFor: (r) => r });
  console.log(`${task.question} → ${out.answer} (golds ${task.golds.join(', ')}), ${out.calls.length} calls`);
}
