// Builds the WebAssembly SIMD kernels from AssemblyScript sources (assembly/*.ts) into build/*.wasm.
// Runs on `npm install` / `npm ci` in a checkout through package.json's `dependencies` script (`npm run build`), so a
// fresh clone needs nothing prebuilt, and on `npm pack` / `npm publish` through `prepack`. Not `prepare`: npm 11
// lists a package's `prepare` among the install scripts to approve when its tarball is installed, whereas
// `dependencies` runs only in the project being installed, never in a project that depends on pagellm.
// `--if-stale` (what `npm start` runs) builds only when a build/*.wasm is missing or older than assembly/ or this
// script, so a checkout whose kernel sources changed since its install (a pull, an edit) never serves old kernels.
import { existsSync, mkdirSync, readdirSync, renameSync, statSync } from 'node:fs';
import { dirname, join, basename } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const srcDir = join(root, 'assembly');
const outDir = join(root, 'build');
mkdirSync(outDir, { recursive: true });

// Every top-level assembly/*.ts that is not a library module (files starting with "_" are imported helpers).
const entries = existsSync(srcDir)
  ? readdirSync(srcDir).filter((f) => f.endsWith('.ts') && !f.startsWith('_') && f !== 'tsconfig.json')
  : [];

// Two builds of each entry from the same sources: plain SIMD (NAME.wasm, runs on every SIMD engine) and relaxed SIMD
// (NAME-relaxed.wasm: int8 dot products with i32x4.relaxed_dot_i8x16_i7x16_add_s; the sources branch on
// ASC_FEATURE_RELAXED_SIMD). The library picks the relaxed one where the engine validates it.
const variants = [
  { suffix: '', features: [] },
  { suffix: '-relaxed', features: ['--enable', 'relaxed-simd'] },
];

/** Whether every output is at least as new as every source (assembly/*, this script). */
function upToDate() {
  if (!existsSync(srcDir)) return true;
  const sources = [fileURLToPath(import.meta.url), ...readdirSync(srcDir).map((f) => join(srcDir, f))];
  const newestSource = Math.max(...sources.map((f) => statSync(f).mtimeMs));
  const outputs = entries.flatMap((e) =>
    variants.map(({ suffix }) => join(outDir, `${basename(e, '.ts')}${suffix}.wasm`)),
  );
  return outputs.every((f) => existsSync(f) && statSync(f).mtimeMs >= newestSource);
}

if (process.argv.includes('--if-stale') && upToDate()) process.exit(0);
// Loaded only when something is built: the compiler takes a while to load.
const { main: asc } = await import('assemblyscript/asc');

for (const entry of entries) {
  const name = basename(entry, '.ts');
  for (const { suffix, features } of variants) {
    const out = `${name}${suffix}`;
    const args = [
      join('assembly', entry),
      '--outFile',
      join('build', `${out}.partial.wasm`),
      '--textFile',
      join('build', `${out}.wat`),
      '-O3',
      '--noAssert',
      '--runtime',
      'stub',
      '--enable',
      'simd',
      '--enable',
      'threads',
      ...features,
      '--importMemory',
      '--sharedMemory',
      '--initialMemory',
      '1',
      '--maximumMemory',
      '65536',
    ];
    // asc writes its diagnostics to the streams given here.
    const { error } = await asc(args, { stdout: process.stdout, stderr: process.stderr });
    if (error) {
      throw new Error(`AssemblyScript build of assembly/${entry} (${out}) failed: ${error.message}`);
    }
    // Written beside and renamed over the old build in one step: a process loading the kernels meanwhile (a test, a
    // server) reads the old file or the new one, never half of one.
    renameSync(join(outDir, `${out}.partial.wasm`), join(outDir, `${out}.wasm`));
    console.log(`built build/${out}.wasm`);
  }
}
