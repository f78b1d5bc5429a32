// Worker thread of the kernel pool (plain JavaScript so it starts without a TypeScript loader, under node, tsx and
// vitest alike). It instantiates the shared kernel module on the shared memory, then loops: wait for a new job
// generation, join the job if it is still open, take work items until none are left, leave. See thread-pool.ts for
// the protocol.
import { parentPort, workerData } from 'node:worker_threads';

const { module, memory, ctlOffset, tid, exportNames, spinIterations } = workerData;
const GEN = 0,
  STATE = 1,
  OP = 2,
  NT = 3,
  NARGS = 4,
  ERR = 5,
  SLEEPERS = 6,
  JOINS = 7,
  JOINED = 9;
const OPEN = 0x8000,
  ACTIVE = 0x7fff;
const OP_EXIT = -1;

const instance = new WebAssembly.Instance(module, {
  env: {
    memory,
    abort: () => {
      throw new Error('kernel abort');
    },
  },
});
instance.exports.init(ctlOffset + 32);
const fns = exportNames.map((name) => instance.exports[name]);
const ctl = new Int32Array(memory.buffer, ctlOffset, 32);
const args = new Float64Array(memory.buffer, ctlOffset + 128, 48);
const errBytes = new Uint8Array(memory.buffer, ctlOffset + 512, 512);
const callArgs = [];

/** Joins job `gen` if it is still open (CAS on STATE: same generation tag, OPEN set, one more active worker). */
function join(gen) {
  const tag = (gen & 0xffff) << 16;
  for (;;) {
    const s = Atomics.load(ctl, STATE);
    if ((s & 0xffff0000) !== tag || (s & OPEN) === 0) return false;
    if (Atomics.compareExchange(ctl, STATE, s, s + 1) === s) return true;
  }
}

// Read the generation before reporting ready: the first job may be posted the moment the caller hears from us.
let seen = Atomics.load(ctl, GEN);
parentPort.postMessage({ ready: true });

for (;;) {
  let spins = 0;
  while (Atomics.load(ctl, GEN) === seen) {
    if (++spins > spinIterations) {
      // Announce the sleep first, then re-check: a job posted in between is seen here or gets a notify.
      Atomics.add(ctl, SLEEPERS, 1);
      if (Atomics.load(ctl, GEN) === seen) Atomics.wait(ctl, GEN, seen);
      Atomics.sub(ctl, SLEEPERS, 1);
      spins = 0;
    }
  }
  seen = Atomics.load(ctl, GEN);
  if (ctl[OP] === OP_EXIT) break;
  if (!join(seen)) continue; // the caller already finished this job alone
  Atomics.add(ctl, JOINS, 1);
  Atomics.add(ctl, JOINED, 1);
  Atomics.notify(ctl, JOINED);
  const op = ctl[OP];
  const nt = ctl[NT];
  if (tid < nt) {
    const n = ctl[NARGS];
    callArgs.length = n + 2;
    for (let i = 0; i < n; i++) callArgs[i] = args[i];
    callArgs[n] = tid;
    callArgs[n + 1] = nt;
    try {
      fns[op].apply(null, callArgs);
    } catch (e) {
      if (Atomics.compareExchange(ctl, ERR, 0, tid) === 0) {
        const msg = new TextEncoder().encode(`worker ${tid}: ${String(e && e.message ? e.message : e)}`.slice(0, 500));
        errBytes.fill(0);
        errBytes.set(msg);
      }
    }
  }
  if ((Atomics.sub(ctl, STATE, 1) & ACTIVE) === 1) Atomics.notify(ctl, STATE);
}
