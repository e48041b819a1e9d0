/** Progress bars on stderr (cli-progress): questions, trajectories, rounds, scoring. */
import cliProgress from 'cli-progress';
import type { ProgressSink } from '../pipeline/pipeline';

export interface ProgressBars extends ProgressSink {
  /**
   * Batch `b` was delivered (its lines written). A batch counts as done only then: the pipeline
   * scores a batch and may still stop the run on it (every trajectory failed on the server).
   */
  onBatchWritten(batch: number): void;
  stop(): void;
}

/** Without a terminal: one line per batch delivered. */
function lineProgress(stream: NodeJS.WritableStream): ProgressBars {
  let batches = 0;
  let total = 0;
  let trajectories = 0;
  let rounds = 0;
  let questions = 0;
  let items = 0;
  let pending = 0;
  return {
    onPlan(p) { total = p.batches; },
    onRound() { rounds++; },
    onTrajectoryDone() { trajectories++; },
    onQuestionDone() { questions++; },
    onScoring(e) {
      if (e.done) pending = e.items;
    },
    onBatchWritten() {
      batches++;
      items += pending;
      pending = 0;
      stream.write(`batch ${batches}/${total}: ${questions} questions, ${trajectories} trajectories, ${rounds} rounds, ${items} items scored\n`);
    },
    stop() {},
  };
}

export function progressBars(stream: NodeJS.WritableStream, enabled: boolean): ProgressBars {
  if (!enabled) return { onBatchWritten() {}, stop() {} };
  if (!(stream as NodeJS.WriteStream).isTTY) return lineProgress(stream);
  const multi = new cliProgress.MultiBar(
    {
      stream: stream as NodeJS.WriteStream,
      format: ' {label} |{bar}| {value}/{total} {extra}',
      barsize: 30,
      hideCursor: true,
      clearOnComplete: false,
      etaBuffer: 50,
      fps: 5,
    },
    cliProgress.Presets.shades_classic,
  );
  let questions: cliProgress.SingleBar | null = null;
  let trajectories: cliProgress.SingleBar | null = null;
  let rounds: cliProgress.SingleBar | null = null;
  let scoring: cliProgress.SingleBar | null = null;
  let roundCount = 0;
  let roundTotal = 0;
  let scored = 0;
  let pending = 0;
  return {
    onPlan(p) {
      const pad = (s: string) => s.padEnd(12);
      questions = multi.create(p.questions, 0, { label: pad('questions'), extra: p.skippedQuestions ? `(${p.skippedQuestions} done before)` : '' });
      trajectories = multi.create(p.trajectories, 0, { label: pad('trajectories'), extra: '' });
      roundTotal = p.trajectories;
      rounds = multi.create(roundTotal, 0, { label: pad('rounds'), extra: '' });
      scoring = multi.create(p.batches, 0, { label: pad('scoring'), extra: 'batches' });
    },
    onRound() {
      roundCount++;
      if (roundCount > roundTotal) {
        roundTotal = roundCount;
        rounds?.setTotal(roundTotal);
      }
      rounds?.update(roundCount);
    },
    onTrajectoryDone() {
      trajectories?.increment();
    },
    onQuestionDone() {
      questions?.increment();
    },
    onScoring(e) {
      if (e.done) pending = e.items;
    },
    onBatchWritten() {
      scored += pending;
      pending = 0;
      scoring?.increment(1, { extra: `batches, ${scored} items scored` });
    },
    stop() {
      multi.stop();
    },
  };
}
