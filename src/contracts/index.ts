/**
 * The types every layer shares, importing nothing outside this folder: the engine and tool
 * interfaces (./engines) and the records the pipeline hands from step to step, Question →
 * Trajectory → Snapshot → ScoredTrajectory → BatchRecord (./records), and the learner API (./learner).
 */
export * from './engines';
export * from './records';
export * from './learner';
