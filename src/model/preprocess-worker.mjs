// Worker thread of the preprocess pool (preprocess-pool.ts): renders chat templates with @huggingface/jinja under
// step, list-size and output-length budgets, and tokenizes / detokenizes with the model's tokenizer, so that neither
// runs on the server's event loop. Plain JavaScript so it starts without a TypeScript loader; the tokenizer is the
// compiled module beside this file in dist/, or the TypeScript source through tsx when run from src/. Wall time and
// memory are bounded by the pool (it terminates this thread on timeout; resourceLimits cap its heap).
//
// Messages in:  { id, op: 'render', source, context, limits: { maxSteps, maxItems, maxOutputChars } }
//               { id, op: 'encode', texts, addSpecialTokens }   { id, op: 'decode', ids, skipSpecialTokens }
// Messages out: { ready: true } once, then { id, ok: true, value } or { id, ok: false, error: { kind, limit?, message } }
import { existsSync } from 'node:fs';
import { parentPort, workerData } from 'node:worker_threads';
import { Environment, Interpreter, Template } from '@huggingface/jinja';

/** A render budget was exhausted; `limit` is 'steps', 'items' or 'output'. */
class LimitExceeded extends Error {
  constructor(limit, message) {
    super(message);
    this.limit = limit;
  }
}

// The budget of the render in progress (null outside a render). Rendering is synchronous, so one slot suffices.
let budget = null;

// Every expression and statement @huggingface/jinja evaluates goes through Interpreter.evaluate: counting calls
// bounds loops, recursion and filter chains alike, and looking at each result's size stops a string or a list from
// doubling its way to gigabytes (each check runs before the next doubling, so nothing grows past 2x its limit).
const evaluate = Interpreter.prototype.evaluate;
Interpreter.prototype.evaluate = function boundedEvaluate(statement, environment) {
  if (budget === null) return evaluate.call(this, statement, environment);
  if (++budget.steps > budget.maxSteps) {
    throw new LimitExceeded('steps', `the chat template ran more than ${budget.maxSteps} evaluation steps`);
  }
  const value = evaluate.call(this, statement, environment);
  checkSize(value);
  return value;
};

function checkSize(value) {
  if (value === null || value === undefined) return;
  if (value.type === 'StringValue' && value.value.length > budget.maxOutputChars) {
    throw new LimitExceeded(
      'output',
      `the chat template built a string of more than ${budget.maxOutputChars} characters`,
    );
  }
  if (value.type === 'ArrayValue' && value.value.length > budget.maxItems) {
    throw new LimitExceeded('items', `the chat template built a list of more than ${budget.maxItems} items`);
  }
}

// Jinja's range(), refusing before it allocates: range(10**9) would otherwise grow one array until V8 aborts the
// whole process ("invalid size error"), which no heap limit catches.
function boundedRange(start, stop, step = 1) {
  if (stop === undefined) {
    stop = start;
    start = 0;
  }
  if (typeof start !== 'number' || typeof stop !== 'number' || typeof step !== 'number') {
    throw new Error('range() takes integers');
  }
  if (step === 0) throw new Error('range() step must not be zero');
  const count = Math.max(0, Math.ceil((stop - start) / step));
  if (count > budget.maxItems) {
    throw new LimitExceeded('items', `range() of ${count} items exceeds the chat template limit of ${budget.maxItems}`);
  }
  const out = new Array(count);
  for (let i = 0; i < count; i++) out[i] = start + i * step;
  return out;
}

// The library declares range() as a global of every render's environment; ours replaces it there.
const set = Environment.prototype.set;
Environment.prototype.set = function setBoundedRange(name, value) {
  return set.call(this, name, name === 'range' && typeof value === 'function' ? boundedRange : value);
};

// Parsed templates by source text, oldest dropped first (a server sees its own template and a few from requests).
const parsed = new Map();
const PARSE_CACHE_SIZE = 16;

function parse(source) {
  let entry = parsed.get(source);
  if (entry === undefined) {
    try {
      entry = new Template(source);
    } catch (e) {
      entry = new Error(`chat template does not parse: ${e.message}`);
      entry.parseError = true;
    }
    parsed.set(source, entry);
    if (parsed.size > PARSE_CACHE_SIZE) parsed.delete(parsed.keys().next().value);
  }
  if (entry instanceof Error) throw entry;
  return entry;
}

function render(source, context, limits) {
  const template = parse(source);
  budget = { steps: 0, ...limits };
  try {
    const text = template.render(context);
    if (text.length > limits.maxOutputChars) {
      throw new LimitExceeded(
        'output',
        `the chat template built a string of more than ${limits.maxOutputChars} characters`,
      );
    }
    return text;
  } finally {
    budget = null;
  }
}

let tokenizer = null;
if (workerData?.model !== undefined) {
  // Compiled (dist/): the JavaScript beside this file. From the sources: the TypeScript, through tsx.
  let compiled = new URL('./read-model-source.js', import.meta.url);
  if (!existsSync(compiled)) {
    const { register } = await import('tsx/esm/api');
    register();
    compiled = new URL('./read-model-source.ts', import.meta.url);
  }
  const { readModelSource } = await import(compiled.href);
  const options = workerData.tokenizerPath !== undefined ? { tokenizerPath: workerData.tokenizerPath } : {};
  tokenizer = (await readModelSource(workerData.model, options)).tokenizer;
}

function needTokenizer() {
  if (tokenizer === null) throw new Error('this preprocess worker was started without a model');
  return tokenizer;
}

parentPort.on('message', (msg) => {
  try {
    let value;
    if (msg.op === 'render') value = render(msg.source, msg.context, msg.limits);
    else if (msg.op === 'encode')
      value = msg.texts.map((t) => needTokenizer().encode(t, { addSpecialTokens: msg.addSpecialTokens }));
    else if (msg.op === 'decode') value = needTokenizer().decode(msg.ids, { skipSpecialTokens: msg.skipSpecialTokens });
    else throw new Error(`unknown preprocess op ${String(msg.op)}`);
    parentPort.postMessage({ id: msg.id, ok: true, value });
  } catch (e) {
    const limit = e instanceof LimitExceeded ? e.limit : undefined;
    const kind = limit !== undefined ? 'limit' : msg.op === 'render' ? 'template' : 'internal';
    let message = e instanceof Error ? e.message : String(e);
    if (kind === 'template' && e.parseError !== true) message = `chat template failed: ${message}`;
    parentPort.postMessage({ id: msg.id, ok: false, error: { kind, limit, message } });
  }
});
parentPort.postMessage({ ready: true });
