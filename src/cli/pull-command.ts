import { Command } from 'commander';
import { statSync } from 'node:fs';
import { join } from 'node:path';
import { formatBytes } from '../server/format-bytes.js';
import { addHubOptions, type HubCliOptions } from './hub-cli-options.js';
import { pullModel } from './input-path.js';

/**
 * `pagellm pull <org/name[:QUANT]>`: downloads a Hub model into the Hugging Face cache without serving it (as
 * `ollama pull` and `huggingface-cli download`), then prints what it pulled and the path pagellm loads it from.
 * A split GGUF is downloaded whole (every part); the path printed is part 1's, which pagellm reads as one model.
 */
export function createPullCommand(): Command {
  const cmd = new Command('pull')
    .description('download a model from the Hugging Face Hub into the cache, without serving it')
    .argument('<model>', 'Hub repository id: org/name, org/name:QUANT (a GGUF quantization) or hf.co/org/name');
  return addHubOptions(cmd).action(async (model: string, opts: HubCliOptions) => {
    const snap = await pullModel(model, opts);
    const bytes = snap.files.reduce((n, f) => n + statSync(join(snap.snapshotDir, f)).size, 0);
    const what =
      snap.format === 'safetensors'
        ? `${snap.files.length} files`
        : snap.splitCount > 1
          ? `${snap.files[0]} (split in ${snap.splitCount} parts)`
          : snap.files[0];
    process.stdout.write(
      `pulled ${snap.repo} (${snap.revision}, commit ${snap.commit.slice(0, 12)}): ${what}, ${formatBytes(bytes)}` +
        `${snap.bytesFetched === 0 ? ', all in the cache already' : `, ${formatBytes(snap.bytesFetched)} downloaded`}\n` +
        `${snap.modelPath}\n`,
    );
  });
}
