/** The `mempo train` command's flags (docs/algorithm.md §9, docs/learner.md) → TrainSettings. */
import { Command, Option } from 'commander';
import { EMBEDDED } from '../paths';
import { MempoError } from '../errors';
import { AGG_MODES, KL_TYPES } from '../kernels/ppo-policy-loss';
import { resolveTrainOptions, trainSchema } from '../train/options';
import { int, nonNeg, num } from './options';
import { executeTrain, type TrainSettings } from './train';
import { LEARNER_DEFAULTS } from '../learner/http-learner';
import type { RunIO, RunSettings } from './run-settings';
import { refuseBuiltInFlags } from './agent';
import { loadAgentModule } from '../agents/agent-module';

const D = trainSchema.parse({});
const pos = num((x) => x > 0 && Number.isFinite(x), 'a positive number');

export function trainCommand(io: RunIO, onDone: (code: number) => void, inputs: (c: Command) => Command, runSettings: (o: Record<string, unknown>, c: Command) => RunSettings): Command {
  const cmd = inputs(new Command('train'))
    .summary('train the policy with MemPO or GRPO via a learner')
    .description('Optimise the policy with MemPO (docs/algorithm.md §9): per step, roll out --questions-per-step questions × -n samples with the current weights, score them, update on the learner (PPO loss, native), sync the weights to the rollout engines, evaluate every --eval-every steps. Writes DIR/metrics.jsonl, DIR/checkpoints/step-N/ (model directories) and DIR/train-report.html. --no-memory-reward is the GRPO baseline.')
    .requiredOption('--out <dir>', 'output directory')
    .option('--steps <n>', 'optimiser steps', int(1), D.steps)
    .option('--questions-per-step <n>', 'questions sampled per step', int(1), D.questionsPerStep)
    .option('--ppo-epochs <n>', "passes over a step's batch", int(1), D.ppoEpochs)
    .option('--mini-batches <n>', 'optimiser updates per epoch', int(1), D.miniBatches)
    .option('--micro-batch-tokens <n>', 'most padded tokens per learner forward/backward', int(1), D.microBatchTokens)
    .option('--lr <x>', 'AdamW learning rate', pos, D.optim.lr)
    .option('--weight-decay <x>', 'AdamW weight decay', nonNeg, D.optim.weightDecay)
    .option('--max-grad-norm <x>', 'gradient clipping by global norm (0 = none)', nonNeg, D.optim.maxGradNorm)
    .option('--kl-coef <x>', 'KL-to-reference coefficient (0 = off)', nonNeg, D.loss.klCoef)
    .addOption(new Option('--kl-type <k>', 'KL estimator').choices([...KL_TYPES]).default(D.loss.klType))
    .option('--clip-low <x>', 'PPO clip below 1', nonNeg, D.loss.clipLow)
    .option('--clip-high <x>', 'PPO clip above 1', nonNeg, D.loss.clipHigh)
    .option('--clip-c <x>', 'dual clip for negative advantages', pos, D.loss.clipC)
    .addOption(new Option('--agg-mode <m>', 'loss aggregation').choices([...AGG_MODES]).default(D.loss.aggMode))
    .addOption(new Option('--old-logp <from>', "[decided] old log-probs: recomputed by the 'learner' or the 'sampler's (the sampler's with --async-level above 0)").choices(['learner', 'sampler']).default(D.oldLogp))
    .option('--async-level <n>', 'overlap steps: step k samples with the weights of step k-1-n while the learner updates (0 = one step after another)', int(0), D.asyncLevel)
    .option('--eval-every <n>', 'evaluate on the dev slice (memory policy, greedy) every n steps; 0 = never', int(0), D.evalEvery)
    .option('--eval-questions <n>', 'questions of the dev slice', int(1), D.evalQuestions)
    .option('--eval-file <file>', 'dev questions JSONL (default: the embedded dev split)')
    .option('--checkpoint-every <n>', 'checkpoint every n steps (and after the last)', int(1), D.checkpointEvery)
    .option('--keep-checkpoints <n>', 'checkpoints kept', int(1), D.keepCheckpoints)
    .option('--resume', 'continue from the newest complete checkpoint in DIR')
    .option('--force', 'delete a previous run in DIR first')
    .option('--no-report', 'do not write train-report.html')
    .option('--learner <url>', 'a running learner (docs/learner.md) instead of spawning the torch learner')
    .option('--learner-token <token>', 'bearer token of --learner (also MEMPO_LEARNER_TOKEN)')
    .option('--learner-timeout <ms>', 'per-request timeout of the learner', int(1), LEARNER_DEFAULTS.timeoutMs)
    .option('--learner-procs <n>', 'processes of the spawned learner: data parallel, one per device (docs/learner.md)', int(1), 1)
    .option('--python <exe>', 'Python with torch for the spawned learner (default: MEMPO_PYTHON, else python3, /usr/bin/python3)')
    .addOption(new Option('--device <d>', 'device of the spawned learner').choices(['auto', 'cpu', 'cuda']).default('auto'))
    .exitOverride()
    .action(async (o: Record<string, unknown>) => {
      const agentFile = o['agent'] as string | undefined;
      if (agentFile !== undefined) refuseBuiltInFlags(cmd, 'train', agentFile);
      const run = runSettings(o, cmd);
      if (o['learner'] !== undefined && cmd.getOptionValueSource('learnerProcs') === 'cli') {
        throw new MempoError('ERR_INVALID_OPTION', `--learner-procs ${String(o['learnerProcs'])} is for the learner mempo spawns, not for --learner ${String(o['learner'])}: start that one with python -m mempo_learner --nproc N (docs/learner.md)`);
      }
      const asyncLevel = o['asyncLevel'] as number;
      if (asyncLevel > 0 && cmd.getOptionValueSource('oldLogp') === 'cli' && o['oldLogp'] === 'learner') {
        throw new MempoError('ERR_INVALID_OPTION', `--old-logp learner cannot go with --async-level ${asyncLevel}: an overlapped step's rows were sampled by older weights than the learner's, so the PPO ratio is taken against the sampler's log-probs (--old-logp sampler)`);
      }
      const train = resolveTrainOptions({
        steps: o['steps'], questionsPerStep: o['questionsPerStep'], ppoEpochs: o['ppoEpochs'], miniBatches: o['miniBatches'],
        microBatchTokens: o['microBatchTokens'], oldLogp: asyncLevel > 0 ? 'sampler' : o['oldLogp'], asyncLevel, evalEvery: agentFile === undefined ? o['evalEvery'] : 0, evalQuestions: o['evalQuestions'],
        checkpointEvery: o['checkpointEvery'], keepCheckpoints: o['keepCheckpoints'], seed: run.options.rollout.seed,
        loss: { clipLow: o['clipLow'], clipHigh: o['clipHigh'], clipC: o['clipC'], aggMode: o['aggMode'], klCoef: o['klCoef'], klType: o['klType'] },
        optim: { lr: o['lr'], weightDecay: o['weightDecay'], maxGradNorm: o['maxGradNorm'] },
      });
      const s: TrainSettings = {
        run,
        out: o['out'] as string,
        train,
        evalQuestions: (o['evalFile'] as string | undefined) ?? EMBEDDED.split('dev'),
        learner: {
          url: (o['learner'] as string | undefined) ?? null,
          token: (o['learnerToken'] as string | undefined) ?? null,
          python: (o['python'] as string | undefined) ?? null,
          device: o['device'] as 'auto' | 'cpu' | 'cuda',
          procs: o['learnerProcs'] as number,
          timeoutMs: o['learnerTimeout'] as number,
        },
        force: Boolean(o['force']),
        report: o['report'] !== false,
        agent: agentFile === undefined ? null : {
          module: await loadAgentModule(agentFile),
          concurrency: o['agentConcurrency'] as number,
          fromFlags: cmd.getOptionValueSource('questions') === 'cli' || cmd.getOptionValueSource('split') === 'cli',
        },
      };
      await executeTrain(s, io);
      onDone(0);
    });
  return cmd;
}
