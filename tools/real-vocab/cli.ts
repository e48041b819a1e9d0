/**
 * `node dist-tools/tools/real-vocab/cli.js OUT_DIR [--seed N] [--hidden N] [--heads N] [--layers N] [--no-script]`
 * (after `npx tsc -p tsconfig.tools.json`): writes the real-vocabulary test model (build.ts).
 */
import { buildRealVocabModel } from './build';

function main(argv: string[]): void {
  const out = argv.find((a, i) => !a.startsWith('--') && (i === 0 || !argv[i - 1]!.startsWith('--')));
  if (out === undefined) {
    console.error('usage: cli.js OUT_DIR [--seed N] [--hidden N] [--heads N] [--layers N] [--no-script]');
    process.exit(2);
  }
  const num = (flag: string): number | undefined => {
    const i = argv.indexOf(flag);
    return i >= 0 ? Number(argv[i + 1]) : undefined;
  };
  const sizes = { seed: num('--seed'), hidden: num('--hidden'), heads: num('--heads'), layers: num('--layers') };
  const t0 = Date.now();
  const m = buildRealVocabModel(out, {
    ...Object.fromEntries(Object.entries(sizes).filter(([, v]) => v !== undefined)),
    script: !argv.includes('--no-script'),
  });
  const total = Object.values(m.bytes).reduce((a, b) => a + b, 0);
  console.log(`${m.dir}: ${Object.entries(m.bytes).map(([f, b]) => `${f} ${b}`).join(', ')} (${total} bytes, ${Date.now() - t0} ms)`);
}

main(process.argv.slice(2));
