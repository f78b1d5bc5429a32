// Where the CLI and the tests find the shared model files: $PAGELLM_SHARED_DIR, ../shared beside the project, or
// (in a scratch clone of a local checkout) the shared folder beside the checkout it was cloned from.
import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { defaultModelPath, PROJECT_ROOT, sharedDir } from '../../src/cli/default-model.js';

describe('sharedDir / defaultModelPath', () => {
  it('takes $PAGELLM_SHARED_DIR and $PAGELLM_MODEL first', () => {
    expect(sharedDir({ PAGELLM_SHARED_DIR: '/opt/shared' })).toBe('/opt/shared');
    expect(defaultModelPath({ PAGELLM_SHARED_DIR: '/opt/shared' })).toBe('/opt/shared/models/stories260K');
    expect(defaultModelPath({ PAGELLM_MODEL: 'm.gguf', PAGELLM_SHARED_DIR: '/opt/shared' })).toBe(resolve('m.gguf'));
  });

  it('finds the real stories260K model by default', () => {
    expect(existsSync(join(defaultModelPath({}), 'stories260K.bin'))).toBe(true);
  });

  it('a scratch clone without shared/ beside it finds the one beside the checkout it was cloned from', () => {
    const dir = mkdtempSync(join(tmpdir(), 'pagellm-clone-'));
    try {
      const clone = join(dir, 'repo');
      execFileSync('git', ['clone', '-q', '--no-checkout', PROJECT_ROOT, clone]);
      const script = `import { sharedDir } from ${JSON.stringify(join(clone, 'src/cli/default-model.ts'))}; console.log(sharedDir({}));`;
      mkdirSync(join(clone, 'src/cli'), { recursive: true });
      cpSync(join(PROJECT_ROOT, 'src/cli/default-model.ts'), join(clone, 'src/cli/default-model.ts'));
      mkdirSync(join(clone, 'src/model'), { recursive: true });
      cpSync(join(PROJECT_ROOT, 'src/model/bundled-model.ts'), join(clone, 'src/model/bundled-model.ts'));
      cpSync(join(PROJECT_ROOT, 'package.json'), join(clone, 'package.json')); // ES module scope for tsx
      const out = execFileSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
        cwd: PROJECT_ROOT,
        encoding: 'utf8',
      });
      expect(out.trim()).toBe(sharedDir({}));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
