/**
 * The progress line without a terminal (src/cli/progress.ts): a batch counts as done only once
 * its lines are written, not when its scoring ends (the run may still stop on that batch).
 */
import { progressBars } from '../../src/cli/progress';
import { sink } from './run-cli';

test('a scored batch is reported only once written: a batch the run stops on is never reported', () => {
  const out = sink();
  const bars = progressBars(out, true);
  bars.onPlan?.({ questions: 2, trajectories: 4, batches: 2, skippedQuestions: 0 });
  for (let i = 0; i < 2; i++) bars.onTrajectoryDone?.();
  bars.onQuestionDone?.('a');
  bars.onScoring?.({ batch: 0, items: 6, done: false });
  bars.onScoring?.({ batch: 0, items: 6, done: true });
  expect(out.text()).toBe('');
  bars.onBatchWritten(0);
  expect(out.text()).toBe('batch 1/2: 1 questions, 2 trajectories, 0 rounds, 6 items scored\n');
  // Batch 2 is scored, then the pipeline stops the run on it (every trajectory failed on the server).
  bars.onScoring?.({ batch: 1, items: 0, done: true });
  bars.stop();
  expect(out.text()).toBe('batch 1/2: 1 questions, 2 trajectories, 0 rounds, 6 items scored\n');
});
