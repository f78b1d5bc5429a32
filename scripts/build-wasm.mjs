// Builds the WebAssembly SIMD kernels from AssemblyScript sources (assembly/*.ts) into build/*.wasm.
// Runs on `npm install` / `npm ci` through the `prepare` script, so a fresh clone needs nothing prebuilt.
import { existsSync, mkdirSync, readdirSync } from 'node:fs';
import { dirname, join, basename } from 'node:path';
import { fileURLToPath } from 'node:url';
import { main as asc } from 'assemblyscript/asc';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const srcDir = join(root, 'assembly');
const outDir = join(root, 'build');
mkdirSync(outDir, { recursive: true });

// Every top-level assembly/*.ts that is not a library module (files starting with "_" are imported helpers).
const entries = existsSync(srcDir)
  ? readdirSync(srcDir).filter((f) => f.endsWith('.ts') && !f.startsWith('_') && f !== 'tsconfig.json')
  : [];

for (const entry of entries) {
  const name = basename(entry, '.ts');
  const args = [
    join('assembly', entry),
    '--outFile', join('build', `${name}.wasm`),
    '--textFile', join('build', `${name}.wat`),
    '-O3', '--noAssert', '--runtime', 'stub',
    '--enable', 'simd', '--enable', 'threads',
    '--importMemory', '--sharedMemory', '--initialMemory', '1', '--maximumMemory', '65536',
  ];
  // asc writes its diagnostics to the streams given here.
  const { error } = await asc(args, { stdout: process.stdout, stderr: process.stderr });
  if (error) {
    throw new Error(`AssemblyScript build of assembly/${entry} failed: ${error.message}`);
  }
  console.log(`built build/${name}.wasm`);
}
