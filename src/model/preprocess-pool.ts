import { Worker } from 'node:worker_threads';
import { ChatTemplateError, ChatTemplateLimitError, PreprocessWorkerError } from './errors.js';

/**
 * The limits every chat-template render runs under, whoever wrote the template (the model, --chat-template or a
 * request). Wall time and memory are enforced by the pool (the render thread is terminated and replaced); steps,
 * list sizes and output length inside the render thread, before the work that would exceed them is done.
 */
export interface ChatTemplateLimits {
  /** Wall-clock milliseconds one render may take, counted from when a worker starts it (queueing excluded). */
  readonly timeoutMs: number;
  /** Evaluation steps (each expression or statement @huggingface/jinja evaluates counts one). */
  readonly maxSteps: number;
  /** Items of any list a render builds (range() refuses before allocating). */
  readonly maxItems: number;
  /** Heap of each render thread, MiB (V8 old generation; the thread is terminated past it). */
  readonly maxMemoryMb: number;
}

/**
 * Defaults: 5 s, 1,000,000 steps (a 1,000-message ChatML conversation takes 10,000 to 20,000), 100,000 list items and
 * a 512 MiB heap per thread.
 */
const DEFAULT_CHAT_TEMPLATE_LIMITS: ChatTemplateLimits = {
  timeoutMs: 5000,
  maxSteps: 1_000_000,
  maxItems: 100_000,
  maxMemoryMb: 512,
};

/** Options of {@link PreprocessPool.start}. */
export interface PreprocessPoolOptions {
  /** Worker threads (default 2). */
  readonly size?: number;
  readonly limits?: Partial<ChatTemplateLimits>;
  /** The model whose tokenizer the workers load (encode/decode need it); render works without. */
  readonly model?: string;
  /** llama2.c tokenizer file, as ReadModelSourceOptions.tokenizerPath. */
  readonly tokenizerPath?: string;
}

type Job = {
  readonly message: Record<string, unknown>;
  readonly timeoutMs: number | null;
  resolve(value: unknown): void;
  reject(err: Error): void;
};

/** One worker thread and the job it runs. */
interface Slot {
  worker: Worker;
  ready: boolean;
  job: Job | null;
  timer: NodeJS.Timeout | null;
}

const WORKER_URL = new URL('./preprocess-worker.mjs', import.meta.url);

/**
 * A small pool of worker threads that render chat templates and tokenize / detokenize off the event loop, so one
 * request's template bomb or 4 MB prompt delays only itself: /health, streams and the engine's steps keep running.
 * A render that runs past `timeoutMs` or out of heap has its thread terminated and replaced; its request gets a
 * ChatTemplateLimitError naming the limit. Jobs wait in FIFO order for a free thread.
 *
 * vLLM renders templates in the API server process (vllm/entrypoints/chat_utils.py `apply_hf_chat_template`); the
 * thread, the limits and the termination are pagellm's.
 */
export class PreprocessPool {
  readonly limits: ChatTemplateLimits;
  private readonly slots: Slot[] = [];
  private readonly queue: Job[] = [];
  private nextId = 1;
  private closed = false;
  private failure: Error | null = null;

  private constructor(private readonly options: PreprocessPoolOptions) {
    this.limits = { ...DEFAULT_CHAT_TEMPLATE_LIMITS, ...options.limits };
  }

  /**
   * Starts `size` workers and waits until each is ready (has loaded the tokenizer when `model` is given).
   * @throws PreprocessWorkerError when a worker fails to start (e.g. the tokenizer does not load).
   */
  static async start(options: PreprocessPoolOptions = {}): Promise<PreprocessPool> {
    const pool = new PreprocessPool(options);
    const size = options.size ?? 2;
    if (!Number.isInteger(size) || size < 1)
      throw new RangeError(`PreprocessPool: size must be a positive integer, got ${size}`);
    try {
      await Promise.all(Array.from({ length: size }, () => pool.spawn()));
    } catch (err) {
      await pool.close();
      throw err;
    }
    return pool;
  }

  /**
   * Renders the template `source` with `context` (messages, add_generation_prompt, bos_token, ...; structured-
   * cloneable values) into text of at most `maxOutputChars` characters.
   * @throws ChatTemplateLimitError when a limit is hit, ChatTemplateError when the template does not parse or
   *   raises, PreprocessWorkerError once the pool is closed.
   */
  render(source: string, context: Record<string, unknown>, maxOutputChars: number): Promise<string> {
    const { maxSteps, maxItems } = this.limits;
    return this.submit(
      { op: 'render', source, context, limits: { maxSteps, maxItems, maxOutputChars } },
      this.limits.timeoutMs,
    ) as Promise<string>;
  }

  /**
   * Token ids of each text, in a worker. @throws PreprocessWorkerError without a model or once closed.
   */
  encode(texts: readonly string[], addSpecialTokens: boolean): Promise<number[][]> {
    return this.submit({ op: 'encode', texts, addSpecialTokens }, null) as Promise<number[][]>;
  }

  /** Text of `ids`, in a worker. @throws PreprocessWorkerError without a model or once closed. */
  decode(ids: readonly number[], skipSpecialTokens: boolean): Promise<string> {
    return this.submit({ op: 'decode', ids, skipSpecialTokens }, null) as Promise<string>;
  }

  /** Jobs a worker is running now (renders, encodes, decodes); queued ones not counted. */
  get numRunning(): number {
    return this.slots.filter((s) => s.job !== null).length;
  }

  /** Terminates the workers; queued and running jobs are rejected. Idempotent. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    const err = new PreprocessWorkerError('the preprocess pool is closed');
    for (const job of this.queue.splice(0)) job.reject(err);
    await Promise.all(
      this.slots.map(async (s) => {
        if (s.timer !== null) clearTimeout(s.timer);
        s.job?.reject(err);
        s.job = null;
        await s.worker.terminate();
      }),
    );
  }

  private submit(message: Record<string, unknown>, timeoutMs: number | null): Promise<unknown> {
    if (this.closed) return Promise.reject(new PreprocessWorkerError('the preprocess pool is closed'));
    if (this.failure !== null) return Promise.reject(this.failure);
    return new Promise((resolve, reject) => {
      this.queue.push({ message: { ...message, id: this.nextId++ }, timeoutMs, resolve, reject });
      this.dispatch();
    });
  }

  private dispatch(): void {
    for (const slot of this.slots) {
      if (this.queue.length === 0) return;
      if (!slot.ready || slot.job !== null) continue;
      const job = this.queue.shift()!;
      slot.job = job;
      if (job.timeoutMs !== null) {
        slot.timer = setTimeout(
          () =>
            this.fail(
              slot,
              new ChatTemplateLimitError(
                'time',
                `the chat template did not finish rendering within its time limit of ${job.timeoutMs} ms`,
              ),
            ),
          job.timeoutMs,
        );
      }
      slot.worker.postMessage(job.message);
    }
  }

  /** Ends the slot's job with `err`, terminates its worker and starts a replacement. */
  private fail(slot: Slot, err: Error): void {
    if (slot.timer !== null) clearTimeout(slot.timer);
    slot.timer = null;
    const job = slot.job;
    slot.job = null;
    slot.ready = false;
    this.slots.splice(this.slots.indexOf(slot), 1);
    slot.worker.removeAllListeners();
    slot.worker.on('error', () => undefined); // a late error of the terminated thread is expected
    void slot.worker.terminate();
    job?.reject(err);
    if (!this.closed) {
      this.spawn().catch((e: unknown) => {
        this.failure = new PreprocessWorkerError(`a preprocess worker could not be restarted: ${String(e)}`, {
          cause: e,
        });
        for (const j of this.queue.splice(0)) j.reject(this.failure);
      });
    }
  }

  private spawn(): Promise<void> {
    const worker = new Worker(WORKER_URL, {
      workerData: { model: this.options.model, tokenizerPath: this.options.tokenizerPath },
      execArgv: [],
      name: 'pagellm-preprocess',
      resourceLimits: { maxOldGenerationSizeMb: this.limits.maxMemoryMb, maxYoungGenerationSizeMb: 32 },
    });
    worker.unref();
    const slot: Slot = { worker, ready: false, job: null, timer: null };
    this.slots.push(slot);
    return new Promise<void>((resolve, reject) => {
      worker.on(
        'message',
        (msg: {
          ready?: true;
          id?: number;
          ok?: boolean;
          value?: unknown;
          error?: { kind: string; limit?: ChatTemplateLimitError['limit']; message: string };
        }) => {
          if (msg.ready === true) {
            slot.ready = true;
            resolve();
            this.dispatch();
            return;
          }
          const job = slot.job;
          if (job === null || job.message.id !== msg.id) return;
          if (slot.timer !== null) clearTimeout(slot.timer);
          slot.timer = null;
          slot.job = null;
          if (msg.ok === true) job.resolve(msg.value);
          else job.reject(workerError(msg.error!));
          this.dispatch();
        },
      );
      worker.on('error', (err: Error & { code?: string }) => {
        if (!slot.ready) {
          this.slots.splice(this.slots.indexOf(slot), 1);
          reject(new PreprocessWorkerError(`a preprocess worker failed to start: ${err.message}`, { cause: err }));
          return;
        }
        this.fail(
          slot,
          err.code === 'ERR_WORKER_OUT_OF_MEMORY'
            ? new ChatTemplateLimitError(
                'memory',
                `the chat template ran out of its memory limit of ${this.limits.maxMemoryMb} MiB`,
              )
            : new PreprocessWorkerError(`a preprocess worker failed: ${err.message}`, { cause: err }),
        );
      });
      worker.on('exit', (code) => {
        if (!slot.ready) {
          reject(new PreprocessWorkerError(`a preprocess worker exited during start (code ${code})`));
        } else if (this.slots.includes(slot) && !this.closed) {
          this.fail(slot, new PreprocessWorkerError(`a preprocess worker exited (code ${code})`));
        }
      });
    });
  }
}

function workerError(e: { kind: string; limit?: ChatTemplateLimitError['limit']; message: string }): Error {
  if (e.kind === 'limit') return new ChatTemplateLimitError(e.limit!, e.message);
  if (e.kind === 'template') return new ChatTemplateError(e.message);
  return new PreprocessWorkerError(e.message);
}
