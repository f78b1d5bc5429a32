import { createLLMEngine } from './src/engine/index.js';
const model = '/work/shared/models/stories260K';
const prompts: Record<string, string> = {
  repeat: 'Once upon a time, there was a little girl named Lily. She loved to play outside in the park. One day, she saw a big, red ball. Once upon a time, there was a little girl named Lily. She loved to play',
  plain: 'Tom and his dog went to the park',
};
const cfg = { method: 'ngram', num_speculative_tokens: 4, prompt_lookup_max: 4, prompt_lookup_min: 1 };
const plain = await createLLMEngine({ model, threads: 1, kvCacheMemory: 16 << 20 });
const spec = await createLLMEngine({ model, threads: 1, kvCacheMemory: 16 << 20, speculativeConfig: cfg });
let n = 0;
const run = (engine: typeof plain, prompt: string): number => {
  engine.addRequest(`r${n++}`, prompt, { temperature: 0, maxTokens: 200, ignoreEos: true });
  const t0 = performance.now();
  while (engine.hasUnfinishedRequests()) engine.step();
  return performance.now() - t0;
};
for (const [name, prompt] of Object.entries(prompts)) {
  const a: number[] = []; const b: number[] = [];
  for (let r = 0; r < 15; r++) { a.push(run(plain, prompt)); b.push(run(spec, prompt)); }
  a.sort((x, y) => x - y); b.sort((x, y) => x - y);
  console.log(name, 'plain', (200 / a[0] * 1000).toFixed(0), 'tok/s; ngram', (200 / b[0] * 1000).toFixed(0), 'tok/s; ratio (min)', (a[0] / b[0]).toFixed(2), 'ratio (median)', (a[7] / b[7]).toFixed(2));
}
const s = spec.getStats().specDecoding!;
console.log(JSON.stringify(s));
await plain.close(); await spec.close();
