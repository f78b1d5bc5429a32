import { Command } from 'commander';
import { hubCacheDir, listCachedModels } from '../model/hub/hub-cache.js';
import { formatBytes } from '../server/format-bytes.js';

/**
 * `pagellm ls`: the models in the Hugging Face cache (`$HF_HUB_CACHE`, `$HF_HOME/hub` or
 * `~/.cache/huggingface/hub`), pulled by pagellm or by any other tool, with their size and revisions (as
 * `huggingface-cli scan-cache` and `ollama ls`). `--json` prints the list as JSON.
 */
export function createLsCommand(): Command {
  return new Command('ls')
    .description('list the Hub models in the Hugging Face cache with their size and revision')
    .option('--json', 'print the list as JSON')
    .action((opts: { json?: boolean }) => {
      const dir = hubCacheDir();
      const models = listCachedModels(dir);
      if (opts.json === true) {
        process.stdout.write(`${JSON.stringify({ cacheDir: dir, models }, null, 2)}\n`);
        return;
      }
      if (models.length === 0) {
        process.stdout.write(`no models in ${dir}; pagellm pull <org/name> downloads one\n`);
        return;
      }
      const rows = models.map((m) => [
        m.repo,
        m.revisions.map((r) => (r.refs.length > 0 ? `${r.refs.join(',')} ` : '') + r.commit.slice(0, 12)).join('; ') ||
          '(none)',
        formatBytes(m.size) + (m.incompleteSize > 0 ? ` (+${formatBytes(m.incompleteSize)} incomplete)` : ''),
      ]);
      const table = [['REPO', 'REVISION', 'SIZE'], ...rows];
      const widths = [0, 1].map((c) => Math.max(...table.map((r) => r[c].length)));
      for (const r of table) process.stdout.write(`${r[0].padEnd(widths[0])}  ${r[1].padEnd(widths[1])}  ${r[2]}\n`);
    });
}
