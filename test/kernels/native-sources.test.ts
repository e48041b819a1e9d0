/**
 * The native source layout, checked where two build systems and two languages cannot share one
 * definition: binding.gyp and CMakeLists.txt list the same C++ sources, every source file is in
 * them, every CPU op (native/cpu/<op>.cc) has its CUDA twin (native/cuda/<op>.cu) and back, and
 * the enum codes of native/enums.h are those of src/kernels/addon.ts.
 */
import * as fs from 'fs';
import * as path from 'path';
import { AGG_MODE_CODES, KL_TYPE_CODES } from '../../src/kernels/addon';

const root = path.resolve(__dirname, '..', '..');
const read = (rel: string): string => fs.readFileSync(path.join(root, rel), 'utf8');

/** CUDA sources that host helper code, not an op (so they have no CPU twin). */
const CUDA_HELPERS = ['runtime'];

function gypSources(): string[] {
  const gyp = JSON.parse(read('binding.gyp')) as { targets: { target_name: string; sources: string[] }[] };
  const target = gyp.targets.find((t) => t.target_name === 'mempo');
  if (!target) throw new Error('binding.gyp has no "mempo" target');
  return target.sources;
}

function cmakeSources(): string[] {
  const m = /set\(MEMPO_SOURCES\s+([^)]*)\)/.exec(read('CMakeLists.txt'));
  if (!m) throw new Error('CMakeLists.txt has no set(MEMPO_SOURCES ...)');
  return m[1]!.split(/\s+/).filter((s) => s !== '' && !s.startsWith('#'));
}

/** Files under native/<dir> ending in ext, as repository paths (native/cuda/emu excluded). */
function filesUnder(dir: string, ext: string): string[] {
  const out: string[] = [];
  const walk = (rel: string): void => {
    for (const e of fs.readdirSync(path.join(root, rel), { withFileTypes: true })) {
      const child = `${rel}/${e.name}`;
      if (e.isDirectory() && child !== 'native/cuda/emu') walk(child);
      else if (e.isFile() && e.name.endsWith(ext)) out.push(child);
    }
  };
  walk(dir);
  return out.sort();
}

const stems = (files: string[], ext: string): string[] => files.map((f) => path.basename(f, ext)).sort();

/** name -> code from an `enum <name> : int { kX = 0,  // 'a', 'b' ... }` block of native/enums.h. */
function cppEnum(name: string): Record<string, number> {
  const block = new RegExp(`enum ${name} : int \\{([^}]*)\\}`).exec(read('native/enums.h'));
  if (!block) throw new Error(`native/enums.h has no enum ${name}`);
  const table: Record<string, number> = {};
  for (const line of block[1]!.split('\n')) {
    const m = /=\s*(\d+),\s*\/\/(.*)$/.exec(line);
    if (!m) continue;
    for (const q of m[2]!.matchAll(/'([^']+)'/g)) table[q[1]!] = Number(m[1]);
  }
  return table;
}

describe('native sources', () => {
  it('binding.gyp and CMakeLists.txt list the same C++ sources', () => {
    const gyp = gypSources();
    const cmake = cmakeSources();
    expect(new Set(gyp).size).toBe(gyp.length);
    expect([...cmake].sort()).toEqual([...gyp].sort());
  });

  it('lists every C++ source file of the CPU build (CUDA sources are globbed)', () => {
    const onDisk = filesUnder('native', '.cc');
    expect([...gypSources()].sort()).toEqual(onDisk);
    for (const f of gypSources()) expect(fs.existsSync(path.join(root, f))).toBe(true);
  });

  it('has a native/cuda/<op>.cu for every native/cpu/<op>.cc, and no CUDA op without a CPU twin', () => {
    const cpu = stems(filesUnder('native/cpu', '.cc'), '.cc');
    const cuda = stems(filesUnder('native/cuda', '.cu'), '.cu').filter((s) => !CUDA_HELPERS.includes(s));
    expect(cpu.length).toBeGreaterThan(0);
    expect(cuda).toEqual(cpu);
  });

  it('maps the enum strings to the same codes in native/enums.h and src/kernels/addon.ts', () => {
    expect(cppEnum('AggMode')).toEqual({ ...AGG_MODE_CODES });
    expect(cppEnum('KlType')).toEqual({ ...KL_TYPE_CODES });
    const counts = read('native/enums.h');
    expect(counts).toContain(`constexpr int kAggModeCount = ${new Set(Object.values(AGG_MODE_CODES)).size};`);
    expect(counts).toContain(`constexpr int kKlTypeCount = ${new Set(Object.values(KL_TYPE_CODES)).size};`);
  });
});
