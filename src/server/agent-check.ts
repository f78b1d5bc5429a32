import { createServer, type Server, type Socket } from 'node:net';

/**
 * The load of one replica as a load balancer sees it: what `GET /load` answers and what the HAProxy agent check
 * reports. Counts are sequence groups (requests) in the scheduler's queues; fractions are in [0, 1].
 */
export interface ReplicaLoad {
  /** Requests in the running queue (vLLM's `num_requests_running`). */
  readonly numRequestsRunning: number;
  /** Requests waiting to be scheduled (`num_requests_waiting`). */
  readonly numRequestsWaiting: number;
  /** Requests preempted to the swap tier (`num_requests_swapped`). */
  readonly numRequestsSwapped: number;
  /** The scheduler's `--max-num-seqs`. */
  readonly maxNumSeqs: number;
  /** Fraction of compute-tier KV blocks in use (`gpu_cache_usage_perc`); evictable cached blocks count as free. */
  readonly kvCacheUsage: number;
  /** max(min(1, requests / maxNumSeqs), kvCacheUsage), requests = running + waiting + swapped. */
  readonly load: number;
  /** The weight the agent reports, in percent of the weight configured in HAProxy; see {@link agentWeightPercent}. */
  readonly weightPercent: number;
  /** True once shutdown began: the agent answers `drain`. */
  readonly draining: boolean;
}

/** The scheduler figures {@link replicaLoad} reads (a subset of the engine's `EngineStats`). */
export interface LoadStats {
  readonly numRunning: number;
  readonly numWaiting: number;
  readonly numSwapped: number;
  /** Fraction of compute-tier blocks in use, in [0, 1]. */
  readonly gpuCacheUsage: number;
}

/**
 * ms a replica answers `drain` while still serving before it refuses new requests and closes (its default
 * `--drain-notice`): one agent interval (`agent-inter 1s` in deploy/haproxy.cfg) for HAProxy to ask again, plus its
 * check window (`timeout check 5s`) for an answer the replica's event loop gives late, between two long steps.
 */
export const DEFAULT_DRAIN_NOTICE_MS = 6000;

/** The weight reported at full load: not 0, which HAProxy treats as DRAIN and would empty a saturated farm. */
const MIN_AGENT_WEIGHT_PERCENT = 1;
/**
 * The weight moves in steps of this many percent: with `hash-type consistent`, every weight change moves some
 * hash keys (prompt prefixes) to another replica, so the weight only changes when the load really did.
 */
const AGENT_WEIGHT_STEP_PERCENT = 10;

/**
 * The weight for a load in [0, 1]: `max(1, 10 · round(10 · (1 − load)))` percent — 100 % idle, 50 % half loaded,
 * 1 % saturated (a 0 % weight would drain the replica).
 */
export function agentWeightPercent(load: number): number {
  const steps = 100 / AGENT_WEIGHT_STEP_PERCENT;
  const weight = AGENT_WEIGHT_STEP_PERCENT * Math.round(steps * (1 - Math.min(1, Math.max(0, load))));
  return Math.max(MIN_AGENT_WEIGHT_PERCENT, weight);
}

/**
 * A replica's load from its scheduler figures: the larger of its request occupancy (running + waiting + swapped
 * requests against `maxNumSeqs`, capped at 1) and its KV cache usage, either of which alone saturates it.
 * @throws RangeError when maxNumSeqs is not a positive integer.
 */
export function replicaLoad(stats: LoadStats, maxNumSeqs: number, draining: boolean): ReplicaLoad {
  if (!Number.isInteger(maxNumSeqs) || maxNumSeqs < 1)
    throw new RangeError(`maxNumSeqs must be ≥ 1, got ${maxNumSeqs}`);
  const requests = stats.numRunning + stats.numWaiting + stats.numSwapped;
  const load = Math.max(Math.min(1, requests / maxNumSeqs), stats.gpuCacheUsage);
  return {
    numRequestsRunning: stats.numRunning,
    numRequestsWaiting: stats.numWaiting,
    numRequestsSwapped: stats.numSwapped,
    maxNumSeqs,
    kvCacheUsage: stats.gpuCacheUsage,
    load,
    weightPercent: agentWeightPercent(load),
    draining,
  };
}

/**
 * The agent-check answer for a load, one line as HAProxy's `agent-check` reads it (words up to the first `\n`):
 * `drain\n` while shutting down, else `up ready <weight>%\n`. `ready` clears an earlier `drain` (HAProxy keeps an
 * agent-set admin state until the agent itself reverts it) and `up` marks the replica up if its health check agrees.
 */
export function agentResponse(load: ReplicaLoad): string {
  return load.draining ? 'drain\n' : `up ready ${load.weightPercent}%\n`;
}

/** `GET /load`'s body: the figures of a {@link ReplicaLoad} in the API's snake_case, plus the agent's answer. */
export function loadResponseBody(load: ReplicaLoad): Record<string, number | boolean | string> {
  return {
    num_requests_running: load.numRequestsRunning,
    num_requests_waiting: load.numRequestsWaiting,
    num_requests_swapped: load.numRequestsSwapped,
    max_num_seqs: load.maxNumSeqs,
    kv_cache_usage: load.kvCacheUsage,
    load: load.load,
    weight_percent: load.weightPercent,
    draining: load.draining,
    agent_response: agentResponse(load).trimEnd(),
  };
}

/** Options of {@link AgentCheckServer.start}. */
export interface AgentCheckOptions {
  /** Interface to listen on (the HTTP server's host). */
  readonly host: string;
  /** TCP port (0 picks a free one). */
  readonly port: number;
  /** Reads the replica's load at each check. */
  readonly report: () => ReplicaLoad;
}

/**
 * The TCP endpoint HAProxy's `agent-check` connects to (`server ... agent-check agent-port <port>`): on every
 * connection it writes {@link agentResponse} for the current load and closes; whatever the peer sends
 * (`agent-send`) is ignored. Not HTTP, and not guarded by the API key: it tells only a weight or `drain`.
 * HAProxy's protocol: configuration manual, section 5.2, "agent-check".
 */
export class AgentCheckServer {
  private constructor(
    private readonly server: Server,
    private readonly sockets: Set<Socket>,
    readonly port: number,
  ) {}

  /**
   * Listens on `host:port`.
   * @throws the listen error (e.g. EADDRINUSE when the port is taken).
   */
  static async start(options: AgentCheckOptions): Promise<AgentCheckServer> {
    const sockets = new Set<Socket>();
    const server = createServer((socket) => {
      sockets.add(socket);
      socket.on('close', () => sockets.delete(socket));
      socket.on('error', () => socket.destroy()); // a peer that resets is not the server's failure
      socket.end(agentResponse(options.report()));
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen({ host: options.host, port: options.port }, () => {
        server.off('error', reject);
        resolve();
      });
    });
    const address = server.address();
    return new AgentCheckServer(
      server,
      sockets,
      typeof address === 'object' && address !== null ? address.port : options.port,
    );
  }

  /** Stops listening and drops open connections. Idempotent. */
  async close(): Promise<void> {
    if (!this.server.listening) return;
    for (const socket of this.sockets) socket.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}
