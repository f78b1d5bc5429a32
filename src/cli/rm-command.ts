import { Command } from 'commander';
import { HubRepoCache, hubCacheDir, listCachedModels } from '../model/hub/hub-cache.js';
import { parseHubModelId } from '../model/hub/hub-model-id.js';
import { CliUsageError } from './cli-usage-error.js';
import { formatBytes } from '../server/format-bytes.js';

/**
 * `pagellm rm <org/name>`: deletes a model repository from the Hugging Face cache (all its revisions, blobs and
 * interrupted downloads), as `ollama rm` and `huggingface-cli delete-cache` do.
 * @throws CliUsageError when the argument is not a Hub id or the repository is not in the cache.
 */
export function createRmCommand(): Command {
  return new Command('rm')
    .description('remove a Hub model (every revision) from the Hugging Face cache')
    .argument('<model>', 'Hub repository id (org/name), as pagellm ls lists it')
    .action((model: string) => {
      const ref = parseHubModelId(model);
      if (ref === null)
        throw new CliUsageError(`${model} is not a Hub repository id; pass org/name as pagellm ls lists it`);
      const dir = hubCacheDir();
      const cached = listCachedModels(dir).find((m) => m.repo === ref.repo);
      if (cached === undefined || !new HubRepoCache(dir, ref.repo).remove()) {
        throw new CliUsageError(`${ref.repo} is not in the cache (${dir}); pagellm ls lists the cached models`);
      }
      process.stdout.write(`removed ${ref.repo} (${formatBytes(cached.size + cached.incompleteSize)}) from ${dir}\n`);
    });
}
