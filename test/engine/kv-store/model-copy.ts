/**
 * Test helper: a copy of stories260K in a temporary folder with one middle tensor rescaled (a fine-tune that changed
 * only middle tensors, as a merged LoRA does), for the tests that check the store's model identity.
 */
import { copyFile, mkdtemp, open } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { readModelSource } from '../../../src/model/read-model-source.js';
import { STORIES_DIR } from '../stories-engine.js';

/** The tensor rescaled: layer 2 of 5, its K projection, ~230 KB into the 1 MB file (far from both ends). */
export const MIDDLE_TENSOR = 'blk.2.attn_k.weight';

/**
 * Copies stories260K (checkpoint and tokenizer) into a new temporary folder, multiplying every f32 of `tensor` by
 * `scale`; returns the copied checkpoint's path.
 */
export async function storiesCopy(tensor = MIDDLE_TENSOR, scale = 1.5): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'pagellm-model-'));
  const ckpt = join(dir, 'stories260K.bin');
  await copyFile(join(STORIES_DIR, 'stories260K.bin'), ckpt);
  await copyFile(join(STORIES_DIR, 'tok512.bin'), join(dir, 'tok512.bin'));
  if (scale !== 1) {
    const t = (await readModelSource(ckpt)).tensors.find((x) => x.name === tensor)!;
    const f = await open(ckpt, 'r+');
    try {
      const buf = Buffer.alloc(t.byteLength);
      await f.read(buf, 0, t.byteLength, t.offset);
      for (let i = 0; i < buf.length; i += 4) buf.writeFloatLE(buf.readFloatLE(i) * scale, i);
      await f.write(buf, 0, buf.length, t.offset);
    } finally {
      await f.close();
    }
  }
  return ckpt;
}
