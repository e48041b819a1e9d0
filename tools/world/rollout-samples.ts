/**
 * Distillation samples from the agent's own rollouts (training/README.md, "Stage 2"): every round
 * of a batch.jsonl trajectory becomes a `rollout` sample, context = the ids the model was sampled
 * from at that round (src/pipeline/batch.ts roundContextIds), output = the round's generated ids.
 * training/train.py --rollout-samples trains them on KL to the --init weights (--distill): the
 * oracle samples hold the agent only on contexts the oracle writes, while greedy drift starts
 * 8–16 rounds into a long bundle, on contexts only the agent's own mems produce.
 */
import { readBatchFile } from '../../src/io/export';
import { writeFileAtomic } from '../../src/io/write';
import { roundContextIds, type BatchRecord } from '../../src/pipeline/batch';
import { MAX_POSITIONS } from './world';

/** One line of train.py's sample files: kind, hops, objectives, round, flawed, context and output ids. */
export interface RolloutSample {
  p: 'rollout';
  h: number;
  k: number;
  r: number;
  f: 0;
  c: number[];
  o: number[];
}

/** The rounds of the kept (not excluded) trajectories; rounds longer than the model's positions are counted, not cut. */
export function rolloutSamples(records: readonly BatchRecord[]): { samples: RolloutSample[]; tooLong: number } {
  const samples: RolloutSample[] = [];
  let tooLong = 0;
  for (const rec of records) {
    if (rec.excluded) continue;
    for (const rd of rec.rounds) {
      const c = roundContextIds(rec, rd.index);
      const o = rec.responseIds.slice(rd.start, rd.end);
      if (o.length === 0) continue;
      if (c.length + o.length > MAX_POSITIONS) {
        tooLong++;
        continue;
      }
      samples.push({ p: 'rollout', h: rec.hops ?? 1, k: rec.objectives ?? 1, r: rd.index, f: 0, c, o });
    }
  }
  return { samples, tooLong };
}

/** batch.jsonl → sample JSONL, written whole (src/io/write.ts). */
export function writeRolloutSamples(batchPath: string, outPath: string): { trajectories: number; samples: number; tooLong: number } {
  const { records } = readBatchFile(batchPath);
  const { samples, tooLong } = rolloutSamples(records);
  if (samples.length === 0) throw new Error(`${batchPath}: no round to turn into a sample`);
  writeFileAtomic(outPath, samples.map((s) => JSON.stringify(s)).join('\n') + '\n');
  return { trajectories: records.filter((r) => !r.excluded).length, samples: samples.length, tooLong };
}
