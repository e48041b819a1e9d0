/**
 * The embedded tokenizer's ids (src/protocol/embedded-ids.ts) belong to models/mempo-tiny alone:
 * the library resolves eos, pad, end-of-turn and stop ids from each model's own tokenizer and
 * config (src/protocol/special-ids.ts). Only the world generator (tools/world), which builds that
 * tokenizer, and tests of the embedded model may import them.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';

const ROOT = join(__dirname, '..', '..');

function tsFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? tsFiles(join(dir, e.name)) : e.name.endsWith('.ts') ? [join(dir, e.name)] : [],
  );
}

describe('embedded token ids', () => {
  it('are imported by no file of src/ (the library reads ids from the model)', () => {
    const users = tsFiles(join(ROOT, 'src'))
      .filter((f) => !f.endsWith(join('protocol', 'embedded-ids.ts')))
      .filter((f) => /from\s+'[^']*embedded-ids'/.test(readFileSync(f, 'utf8')))
      .map((f) => relative(ROOT, f));
    expect(users).toEqual([]);
  });

  it('are not re-exported from the package root', () => {
    const index = readFileSync(join(ROOT, 'src', 'index.ts'), 'utf8');
    expect(index).not.toMatch(/embedded-ids|EOS_TOKEN_ID|STOP_TOKEN_IDS|SPECIAL_TOKEN_IDS/);
  });
});
