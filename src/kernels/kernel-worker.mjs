// Worker thread of the kernel pool (plain JavaScript so it starts without a TypeScript loader, under node, tsx and
// vitest alike). It instantiates the shared kernel module on the shared memory, then loops: wait for the control
// block's generation to change, run its share of the posted kernel call, count itself done. See thread-pool.ts for
// the protocol.
import { parentPort, workerData } from 'node:worker_threads';

const { module, memory, ctlOffset, tid, exportNames, spinIterations } = workerData;
const GEN = 0, PENDING = 1, OP = 2, NT = 3, NARGS = 4, ERR = 5;
const OP_EXIT = -1;

const instance = new WebAssembly.Instance(module, {
  env: {
    memory,
    abort: () => {
      throw new Error('kernel abort');
    },
  },
});
const fns = exportNames.map((name) => instance.exports[name]);
const ctl = new Int32Array(memory.buffer, ctlOffset, 32);
const args = new Float64Array(memory.buffer, ctlOffset + 128, 48);
const errBytes = new Uint8Array(memory.buffer, ctlOffset + 512, 512);
const callArgs = [];

// Read the generation before reporting ready: the first call may be posted the moment the caller hears from us.
let seen = Atomics.load(ctl, GEN);
parentPort.postMessage({ ready: true });
for (;;) {
  let spins = 0;
  while (Atomics.load(ctl, GEN) === seen) {
    if (++spins > spinIterations) {
      Atomics.wait(ctl, GEN, seen);
      spins = 0;
    }
  }
  seen = Atomics.load(ctl, GEN);
  const op = ctl[OP];
  if (op === OP_EXIT) break;
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
  if (Atomics.sub(ctl, PENDING, 1) === 1) Atomics.notify(ctl, PENDING);
}
