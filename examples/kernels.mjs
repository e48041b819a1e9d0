// Advantages and the PPO loss on your own trajectories, from the kernels alone (no model, no
// pipeline): outcome rewards from the responses' text, memory rewards from log-probs your model
// scored, the MemPO advantages in one pass, then the clipped PPO loss and its gradient with
// respect to the log-probs, which your trainer back-propagates (docs/algorithm.md §3-§6).
//
// Run: node examples/kernels.mjs      (after `npm install mempo`; MEMPO_BACKEND=js: the same numbers from the JS twin)
import { backend, computeScore, memoryRewards, mempoAdvantages, gatherLogProbs, ppoPolicyLoss } from 'mempo';

// Two questions, two sampled trajectories each (B = 4), T = 8 response positions per row, row-major.
const golds = { q1: ['Thersekle'], q2: ['Faithhe Works'] };
const uids = ['q1', 'q1', 'q2', 'q2'];
const responses = [
  '<mem>none</mem> <think>Search it.</think> <search>Mamek country</search> <information>Mamek is a city in Thersekle.</information> <mem>Mamek: Thersekle</mem> <think>Found.</think> <answer>Thersekle</answer>',
  '<mem>none</mem> <think>I guess.</think> <answer>Norvale</answer>',
  '<mem>none</mem> <think>Search it.</think> <search>Hollow Winter publisher</search> <information>Faithhe Works published it.</information> <mem>publisher: Faithhe Works</mem> <think>Found.</think> <answer>Faithhe Works</answer>',
  'Faithhe Works',   // no tags: an invalid format scores 0
];
const scores = responses.map((text, i) => computeScore(text, golds[uids[i]]));   // [1, 0, 1, 0]

// Your tokenizer's layout of each response: 1 = a token the policy generated, 0 = an observation or padding.
const B = 4, T = 8;
const responseMask = new Uint8Array([
  1, 1, 1, 0, 0, 1, 1, 1,
  1, 1, 1, 0, 0, 0, 0, 0,
  1, 1, 1, 0, 0, 1, 1, 1,
  1, 1, 0, 0, 0, 0, 0, 0,
]);

// Memory rewards (§4): one snapshot per trajectory that searched (rows 0 and 2), its second <mem>
// at tokens [5, 6) (end exclusive). Your model scored the gold's A = 2 tokens after the full history
// (the first M rows) and after that <mem> alone (the last M rows).
const M = 2, A = 2;
const answerLogp = new Float32Array([-0.4, -0.3, -0.2, -0.6, /* mem only: */ -0.1, -0.1, -0.3, -0.2]);
const ansMask = new Uint8Array(2 * M * A).fill(1);
const { memRewards } = memoryRewards(answerLogp, ansMask, M, A);          // P_mem − P_full per snapshot
const spans = new Int32Array([0, 5, 6, 2, 5, 6]);                        // (row, start, end) per snapshot

const adv = mempoAdvantages({
  scores, groups: uids, responseMask, seqLen: T,
  memRewards, memGroups: ['q1', 'q2'], spans, alpha: 1,
});

// The policy's log-probs of the sampled tokens: gather them from your logits (V = 16 here).
const V = 16;
const logits = new Float32Array(B * T * V).map((_, i) => Math.sin(i * 12.9898) * 3);
const tokens = new Int32Array(B * T).map((_, i) => (i * 7) % V);
const logp = gatherLogProbs(logits, tokens, B * T, V);
const oldLogp = logp.map((x, i) => x - 0.1 * Math.cos(i));              // what the sampling policy gave them

const { loss, grad, clipFrac, approxKl } = ppoPolicyLoss({ logp, oldLogp, advantages: adv.final, mask: responseMask, rows: B, cols: T });
const fmt = (xs, d) => Array.from(xs, (x) => x.toFixed(d)).join(' ');
console.log(`backend ${backend()}; scores ${scores.join(' ')}; memory rewards ${fmt(memRewards, 4)}`);
console.log(`final advantages of row 0: ${fmt(adv.final.subarray(0, T), 3)}`);
console.log(`loss ${loss.toFixed(5)}, clipFrac ${clipFrac}, approxKl ${approxKl.toExponential(2)}, ${grad.length} gradient values`);
