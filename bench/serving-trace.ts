/**
 * Serving traces for `bench/block-manager.ts --make-trace`: the block-manager operations of a continuous-batching
 * run, written as the JSON Lines trace format of bench/README.md.
 *
 * A run: `requests` requests with ShareGPT-like lengths (src/benchmark's clipped log-normal laws; means default to
 * the vLLM paper's 161 prompt / 338 output tokens), each prompt optionally preceded by one shared system prompt of
 * `sharedPrefixTokens` tokens. At most `running` sequences run at once; every step admits waiting requests in order
 * while fewer run (an `allocate`), appends one sampled token to every running sequence (an `append` each), and frees
 * the sequences that produced their last token (a `free`). No vLLM counterpart: vLLM's benchmarks replay real
 * ShareGPT requests through the whole engine.
 */
import { SHAREGPT_LIKE_DEFAULTS, sampleRequestLengths } from '../src/benchmark/index.js';
import { SeededNormal } from '../src/model/random-model.js';

/** What a serving trace looks like (see the module comment). */
export interface ServingTraceOptions {
  /** Requests in the trace. */
  readonly requests: number;
  /** Most sequences running at once. */
  readonly running: number;
  /** Mean prompt length in tokens, shared prefix excluded. */
  readonly promptMean: number;
  /** Mean output length in tokens. */
  readonly outputMean: number;
  /** Tokens of the system prompt every prompt starts with (0: none). */
  readonly sharedPrefixTokens: number;
  /** Seed of the lengths and token ids. */
  readonly seed: number;
}

/** The defaults: 600 requests, 256 running, the vLLM paper's ShareGPT means, no shared prefix, seed 0. */
export const SERVING_TRACE_DEFAULTS: ServingTraceOptions = {
  requests: 600,
  running: 256,
  promptMean: 161,
  outputMean: 338,
  sharedPrefixTokens: 0,
  seed: 0,
};

/**
 * The trace's lines, joined by newlines (ending with one). Token ids are uniform in [0, 32000). Throws what
 * src/benchmark's length laws throw for means outside their bounds (4..1024 tokens).
 */
export function makeServingTrace(o: ServingTraceOptions): string {
  const rng = new SeededNormal(o.seed);
  const d = SHAREGPT_LIKE_DEFAULTS;
  const lengths = sampleRequestLengths(
    {
      kind: 'sharegpt-like',
      numPrompts: o.requests,
      inputMean: o.promptMean,
      outputMean: o.outputMean,
      inputSigma: d.inputSigma,
      outputSigma: d.outputSigma,
      minInputLen: d.minInputLen,
      maxInputLen: d.maxInputLen,
      minOutputLen: d.minOutputLen,
      maxOutputLen: d.maxOutputLen,
    },
    rng,
  );
  const token = (): number => Math.floor(rng.uniform() * 32000);
  const shared = Array.from({ length: o.sharedPrefixTokens }, token);
  const lines: string[] = [];
  const live: { seq: number; left: number }[] = [];
  let next = 0;
  while (next < lengths.length || live.length > 0) {
    while (live.length < o.running && next < lengths.length) {
      const l = lengths[next];
      const prompt = shared.concat(Array.from({ length: l.inputLen }, token));
      lines.push(JSON.stringify({ op: 'allocate', seq: next, tokens: prompt }));
      live.push({ seq: next, left: l.outputLen });
      next++;
    }
    for (const s of live) {
      lines.push(`{"op":"append","seq":${s.seq},"tokens":[${token()}]}`);
      s.left--;
    }
    for (let i = 0; i < live.length; i++) {
      if (live[i].left > 0) continue;
      lines.push(`{"op":"free","seq":${live[i].seq}}`);
      live.splice(i--, 1);
    }
  }
  return lines.join('\n') + '\n';
}
