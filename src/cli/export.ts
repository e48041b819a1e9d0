/**
 * Export for other trainers (docs/export.md): `mempo rollout --export FORMAT[,FORMAT]` after the
 * run, and `mempo export --from DIR --format FORMAT` for a finished run's batch.jsonl.
 */
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { Command, InvalidArgumentError } from 'commander';
import { MempoError } from '../errors';
import { EXPORT_FORMATS, checkTokenIds, readBatchFile, writeExports, type ExportFormat } from '../io/export';
import { readServerModelConfig, type ServerModelConfig } from '../engines/local/model-dir';
import { Tokenizer } from '../engines/local/tokenizer';
import { resolveProtocolIds, type IdCodec } from '../protocol/special-ids';
import { EMBEDDED } from '../paths';
import { int } from './options';
import { holdRunDir } from './run-dir';
import type { RunIO } from './run-settings';

/** `--export` / `--format` values: repeatable, each one format or a comma-separated list. */
export function exportFormatList(v: string, previous: unknown): ExportFormat[] {
  const list = v.split(',').map((f) => f.trim()).filter((f) => f.length > 0);
  if (list.length === 0) throw new InvalidArgumentError(`Expected one of ${EXPORT_FORMATS.join(', ')} (or a comma-separated list).`);
  for (const f of list) {
    if (!(EXPORT_FORMATS as readonly string[]).includes(f)) throw new InvalidArgumentError(`Expected one of ${EXPORT_FORMATS.join(', ')}, not ${JSON.stringify(f)}.`);
  }
  return [...new Set([...(Array.isArray(previous) ? (previous as ExportFormat[]) : []), ...(list as ExportFormat[])])];
}

/**
 * The model's pad id (docs/algorithm.md §8: padding is the model's token): config.json /
 * generation_config.json, then the tokenizer, then the eos id. `codec` saves loading the
 * tokenizer again when the run already has it.
 */
export async function padTokenIdOf(modelDir: string, codec?: IdCodec): Promise<number> {
  const config = readServerModelConfig(modelDir);
  const tok = codec ?? (await Tokenizer.load(modelDir));
  return padOf(modelDir, config, tok);
}

function padOf(modelDir: string, config: ServerModelConfig, tok: IdCodec): number {
  const pad = resolveProtocolIds(tok, { eosTokenIds: config.eosTokenIds, padTokenId: config.padTokenId }).padTokenId;
  if (pad === undefined) throw new MempoError('ERR_MODEL_CONFIG', `${modelDir}: neither its config, its tokenizer nor an eos id gives a pad token id; pass --pad-token-id N`);
  return pad;
}

/** The model directory a finished run used (its run.json), else the embedded model. */
function modelOfRun(dir: string): string {
  const runJson = join(dir, 'run.json');
  if (!existsSync(runJson)) return EMBEDDED.model();
  try {
    const model = (JSON.parse(readFileSync(runJson, 'utf8')) as { settings?: { model?: unknown } } | null)?.settings?.model;
    return typeof model === 'string' ? model : EMBEDDED.model();
  } catch (err) {
    throw new MempoError('ERR_INVALID_INPUT', `${runJson}: not valid JSON (${(err as Error).message}); pass --model DIR to say which model's pad id to use`);
  }
}

export interface ExportSettings {
  from: string;
  to: string;
  formats: ExportFormat[];
  model: string | null;
  padTokenId: number | null;
  quiet: boolean;
}

/** `mempo export`: reads FROM/batch.jsonl and writes each format's file in TO. */
export async function executeExport(s: ExportSettings, io: RunIO): Promise<string[]> {
  const from = resolve(s.from);
  const file = join(from, 'batch.jsonl');
  const batch = readBatchFile(file);
  if (batch.partialLastLine) io.stderr.write(`warning: the last line of ${file} is cut (a killed run); it is left out of the export\n`);
  // The model (given, or the run's) bounds the ids; with only --pad-token-id, the schema's int32 bound does.
  let pad: number;
  if (s.padTokenId !== null && s.model === null) pad = s.padTokenId;
  else {
    const modelDir = s.model ?? modelOfRun(from);
    const config = readServerModelConfig(modelDir);
    const tok = await Tokenizer.load(modelDir);
    checkTokenIds(file, batch, Math.max(tok.size, config.vocabSize ?? 0));
    pad = s.padTokenId ?? padOf(modelDir, config, tok);
  }
  const to = resolve(s.to);
  mkdirSync(to, { recursive: true });
  // One writer per directory: a rollout writing `to` would remove these files as stale (src/io/run-lock.ts).
  const held = holdRunDir(to, 'mempo export', io, s.quiet);
  let files: string[];
  try {
    files = writeExports(to, batch.records, s.formats, pad);
  } finally {
    held.release();
  }
  if (!s.quiet) io.stderr.write(`mempo export: ${batch.records.length} trajectories (pad id ${pad}) → ${files.join(', ')}\n`);
  return files;
}

export function exportCommand(io: RunIO, onDone: (code: number) => void): Command {
  return new Command('export')
    .summary('write a finished batch for verl, TRL or NumPy')
    .description(`Write a finished run's batch.jsonl for another trainer: verl (batch.verl.safetensors: verl's actor-update tensors), trl (batch.trl.json: TRL GRPO rollout_func fields) or tensors (batch.tensors.npz: mempo's padded arrays); see docs/export.md.`)
    .requiredOption('--from <dir>', 'run directory holding batch.jsonl (mempo rollout / eval --out)')
    .requiredOption('--format <formats>', `${EXPORT_FORMATS.join(' | ')}; repeat the flag or comma-separate`, exportFormatList)
    .option('--to <dir>', 'directory to write to (default: --from)')
    .option('--model <dir>', "model directory whose pad token id pads the tensors (default: the run's, from run.json, else the embedded model)")
    .option('--pad-token-id <n>', 'pad token id to use instead of the model directory’s', int(0))
    .option('--quiet', 'no message on stderr')
    .exitOverride()
    .action(async (o: Record<string, unknown>) => {
      await executeExport({
        from: o['from'] as string,
        to: (o['to'] as string | undefined) ?? (o['from'] as string),
        formats: o['format'] as ExportFormat[],
        model: (o['model'] as string | undefined) ?? null,
        padTokenId: (o['padTokenId'] as number | undefined) ?? null,
        quiet: Boolean(o['quiet']),
      }, io);
      onDone(0);
    });
}
