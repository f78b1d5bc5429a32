import { Command, Option } from 'commander';
import { checkEngineArgs } from '../engine/engine-args.js';
import type { EngineArgs } from '../engine/index.js';
import { readModelSourceForAnswers, startServer, type ServerHandle, type ServerOptions } from '../server/api-server.js';
import { startupLogLines } from '../server/startup-log.js';
import { TOOL_CALL_PARSERS, type ToolCallParserName } from '../server/tool-call-parser.js';
import { lazyByteProgress } from './byte-progress.js';
import {
  addChatTemplateOption,
  addEngineOptions,
  addKvStoreOptions,
  addPoolingOption,
  engineArgsFromCli,
  type EngineCliOptions,
} from './engine-cli-options.js';
import { flagError, type FlagError } from './flag-error.js';
import { addHubOptions, type HubCliOptions } from './hub-cli-options.js';
import { resolveModelPath } from './input-path.js';
import { isListenError, listenProblem, tryListen } from './listen-check.js';
import { intAtLeast, listValues, nonEmpty, nonEmptyNames, numberIn, tcpPort } from './option-parsers.js';

/** Options of `pagellm serve` beyond the engine's. */
interface ServeCliOptions extends EngineCliOptions, HubCliOptions {
  /** Names the API accepts in `model` (the first is reported); default: the model folder or file name. */
  servedModelName?: string[];
  /** A chat template: a file path, or the Jinja text itself. */
  chatTemplate?: string;
  host: string;
  port: number;
  agentCheckPort?: number;
  apiKey?: string;
  metricsPublic?: boolean;
  allowedHosts?: string[];
  allowedOrigins?: string[];
  allowedMethods?: string[];
  allowedHeaders?: string[];
  allowCredentials?: boolean;
  requestTimeout: number;
  keepAliveTimeout: number;
  drainTimeout: number;
  drainNotice?: number;
  disableLogStats?: boolean;
  trustRequestChatTemplate?: boolean;
  maxSeqsPerRequest?: number;
  chatTemplateTimeout?: number;
  enableAutoToolChoice?: boolean;
  toolCallParser?: ToolCallParserName;
}

/** Prints one log line on stdout, prefixed like vLLM's INFO / WARNING lines. */
function log(line: string): void {
  const warning = line.startsWith('WARNING: ');
  process.stdout.write(
    `${warning ? 'WARNING' : 'INFO'} ${new Date().toISOString()} ${warning ? line.slice(9) : line}\n`,
  );
}

/**
 * `pagellm serve [model]`: loads the model (a progress bar on a terminal), starts the OpenAI-compatible server,
 * prints the startup summary (model, weight bytes, threads, KV cache, maximum concurrency, URL), logs throughput
 * and KV usage every 10 s while there is traffic, and shuts down cleanly on SIGINT / SIGTERM: new requests get 503
 * while those in flight finish (up to --drain-timeout), then the server closes (a second signal exits at once).
 * Before the model loads it checks what can be checked without it: the option combinations, the listen addresses
 * (a port in use, a host it cannot listen on) and the engine flags against the model's header.
 * Mirrors `vllm serve` (vllm/entrypoints/openai/api_server.py, cli_args.py).
 */
export function createServeCommand(version: string): Command {
  const cmd = new Command('serve')
    .description('start the OpenAI-compatible HTTP server')
    .argument('[model]', 'model file or folder, or Hub id org/name[:QUANT] (same as --model)');
  addServeOptions(cmd);
  cmd.action(async (modelArg: string | undefined, opts: ServeCliOptions) => {
    const modelArgument = modelArg ?? opts.model;
    const progress = lazyByteProgress('loading weights');
    const flagArgs = engineArgsFromCli(opts, modelArgument, progress.report);
    checkServeOptions(cmd, opts);
    await checkListenAddresses(cmd, opts);
    // Last of the checks, as a Hub model is downloaded here.
    const how = '--model <path>, as the first argument or with PAGELLM_MODEL';
    const model = await resolveModelPath(modelArgument, how, opts);
    opts.servedModelName ??= model.repo === undefined ? undefined : [model.repo]; // as `vllm serve org/name`
    const engineArgs = { ...flagArgs, model: model.path };
    const source = await readModelSourceForAnswers(engineArgs.model, opts.allowRandomWeights === true);
    checkEngineArgs(engineArgs, source.config);
    log(`pagellm ${version} starting: model ${engineArgs.model}`);
    const handle = await startServer(serverOptionsFromCli(engineArgs, opts, version))
      .catch((err: unknown) => {
        // Another program took the port while the model loaded: reported as the check before loading does.
        throw isListenError(err) ? listenFlagError(cmd, opts, err) : err;
      })
      .finally(() => progress.stop());
    // Signal handlers go in before the URL is printed: a client may act on that line at once.
    let stopStats = (): void => undefined;
    const shutdown = waitForShutdownSignal(handle, opts.drainTimeout * 1000, () => stopStats());
    logStartup(handle, opts.host);
    if (opts.disableLogStats !== true) stopStats = startStatsLogger(handle);
    await shutdown;
  });
  return cmd;
}

/** Declares the options of `pagellm serve`: the engine's, then the server's (listen address, access, limits). */
function addServeOptions(cmd: Command): void {
  addHubOptions(addEngineOptions(cmd)).option(
    '--served-model-name <names...>',
    "model name(s) the API answers to (default: the model's folder/file name)",
    nonEmptyNames,
  );
  addPoolingOption(cmd);
  addKvStoreOptions(cmd);
  addChatTemplateOption(cmd)
    .option('--host <host>', 'interface to listen on', nonEmpty('a host name or IP address'), '127.0.0.1')
    .option('--port <port>', 'TCP port (0: any free port)', tcpPort, 8000)
    .option(
      '--agent-check-port <port>',
      'also answer HAProxy\'s agent check (a weight from the load, "drain" while ' +
        'shutting down) on this TCP port of --host (off by default)',
      tcpPort,
    )
    .option(
      '--api-key <key>',
      'require "Authorization: Bearer <key>" on every route but /health; the dashboard ' +
        'asks for it once (env PAGELLM_API_KEY)',
      nonEmpty('a key'),
    )
    .option('--metrics-public', 'serve /metrics without the API key')
    .option(
      '--allowed-hosts <hosts...>',
      'Host names to answer to besides localhost, 127.0.0.1, [::1] and --host ' +
        '(DNS-rebinding protection; "*": any; on 0.0.0.0 no check unless given)',
      listValues,
    )
    .option('--allowed-origins <origins...>', 'enable CORS for these origins ("*": any)', listValues)
    .option('--allowed-methods <methods...>', 'CORS: methods allowed cross-origin (default GET, POST)', listValues)
    .option(
      '--allowed-headers <headers...>',
      'CORS: request headers allowed cross-origin (default Authorization, ' + 'Content-Type)',
      listValues,
    )
    .option('--allow-credentials', 'CORS: allow credentials (cookies) cross-origin')
    .option(
      '--request-timeout <seconds>',
      'time to receive a whole request, headers and body (408 after)',
      numberIn(0.01, 86_400),
      60,
    )
    .option('--keep-alive-timeout <seconds>', 'idle time of a keep-alive connection', numberIn(0.01, 86_400), 5)
    .option(
      '--drain-timeout <seconds>',
      'on SIGINT/SIGTERM, how long requests in flight may finish before they are ' + 'ended with 503',
      numberIn(0, 86_400),
      30,
    )
    .option(
      '--drain-notice <seconds>',
      'on SIGINT/SIGTERM, how long the agent check answers "drain" while requests are still served, before new ' +
        "ones get 503 (default with --agent-check-port: 6, HAProxy's agent-inter + timeout check; 0: none)",
      numberIn(0, 3600),
    )
    .option('--disable-log-stats', 'do not log throughput and KV usage every 10 s')
    .option('--trust-request-chat-template', 'accept "chat_template" sent in requests (refused with 400 otherwise)')
    .option(
      '--max-seqs-per-request <n>',
      'most sequences one request may start, prompts × n (default: --max-num-seqs)',
      intAtLeast(1),
    )
    .option(
      '--chat-template-timeout <ms>',
      'wall-clock limit of one chat-template render (default: 5000)',
      intAtLeast(1),
    )
    .option(
      '--enable-auto-tool-choice',
      'let the model decide when to call tools (tool_choice "auto", the default ' +
        'when tools are given); needs --tool-call-parser',
    )
    .addOption(
      new Option('--tool-call-parser <name>', 'the format the model writes tool calls in').choices([
        ...TOOL_CALL_PARSERS,
      ]),
    );
}

/**
 * Refuses option combinations that cannot work (exits through commander with status 1): CORS settings without
 * --allowed-origins, and --enable-auto-tool-choice without a --tool-call-parser.
 */
function checkServeOptions(cmd: Command, opts: ServeCliOptions): void {
  if (
    opts.allowedOrigins === undefined &&
    (opts.allowedMethods !== undefined || opts.allowedHeaders !== undefined || opts.allowCredentials === true)
  ) {
    cmd.error(
      'error: --allowed-methods, --allowed-headers and --allow-credentials configure CORS, which is off ' +
        'until --allowed-origins names the origins to allow',
    );
  }
  if (opts.enableAutoToolChoice === true && opts.toolCallParser === undefined) {
    cmd.error(
      "error: --enable-auto-tool-choice needs --tool-call-parser to read the calls out of the model's " +
        `output (${TOOL_CALL_PARSERS.join(', ')})`,
    );
  }
}

/**
 * Binds --host:--port (and --agent-check-port) and releases them, before the model loads: a port in use, one the
 * user may not listen on, or a host that is not an address of this machine is reported at once (see listen-check.ts).
 * @throws FlagError naming --port, --agent-check-port or --host.
 */
async function checkListenAddresses(cmd: Command, opts: ServeCliOptions): Promise<void> {
  if (opts.agentCheckPort !== undefined && opts.agentCheckPort !== 0 && opts.agentCheckPort === opts.port) {
    throw flagError(
      cmd,
      'agentCheckPort',
      `the HTTP server listens on this port (--port ${opts.port}); pass another port (0 picks a free one)`,
    );
  }
  const ports: Array<['port' | 'agentCheckPort', number]> = [['port', opts.port]];
  if (opts.agentCheckPort !== undefined) ports.push(['agentCheckPort', opts.agentCheckPort]);
  for (const [attr, port] of ports) {
    const err = await tryListen(opts.host, port);
    if (err !== null) throw listenFlagError(cmd, opts, err, attr);
  }
}

/**
 * The flag error for a listen error: --host when the host is at fault, else the port's flag (`attr`; by default
 * the one whose port the error names).
 */
function listenFlagError(
  cmd: Command,
  opts: ServeCliOptions,
  err: NodeJS.ErrnoException & { port?: number },
  attr: 'port' | 'agentCheckPort' = err.port !== undefined && err.port === opts.agentCheckPort && err.port !== opts.port
    ? 'agentCheckPort'
    : 'port',
): FlagError {
  const port = attr === 'port' ? opts.port : (opts.agentCheckPort ?? 0);
  const problem = listenProblem(err, opts.host, port, attr === 'port' ? '--port' : '--agent-check-port');
  return problem.at === 'host'
    ? flagError(cmd, 'host', problem.reason, { cause: err, value: opts.host })
    : flagError(cmd, attr, problem.reason, { cause: err, value: String(port) });
}

/** The server's options from the command line (seconds become ms; the API key falls back to PAGELLM_API_KEY). */
function serverOptionsFromCli(engineArgs: EngineArgs, opts: ServeCliOptions, version: string): ServerOptions {
  return {
    ...engineArgs,
    kvCacheStoreLog: log,
    servedModelNames: opts.servedModelName,
    host: opts.host,
    port: opts.port,
    agentCheckPort: opts.agentCheckPort,
    drainNoticeMs: opts.drainNotice === undefined ? undefined : opts.drainNotice * 1000,
    apiKey: opts.apiKey ?? (process.env.PAGELLM_API_KEY || undefined),
    metricsPublic: opts.metricsPublic,
    allowedHosts: opts.allowedHosts,
    cors:
      opts.allowedOrigins === undefined
        ? undefined
        : {
            allowedOrigins: opts.allowedOrigins,
            allowedMethods: opts.allowedMethods,
            allowedHeaders: opts.allowedHeaders,
            allowCredentials: opts.allowCredentials,
          },
    requestTimeoutMs: opts.requestTimeout * 1000,
    keepAliveTimeoutMs: opts.keepAliveTimeout * 1000,
    chatTemplate: opts.chatTemplate,
    trustRequestChatTemplate: opts.trustRequestChatTemplate,
    maxSeqsPerRequest: opts.maxSeqsPerRequest,
    chatTemplateLimits: opts.chatTemplateTimeout !== undefined ? { timeoutMs: opts.chatTemplateTimeout } : undefined,
    allowRandomWeights: opts.allowRandomWeights,
    enableAutoToolChoice: opts.enableAutoToolChoice,
    toolCallParser: opts.toolCallParser,
    version,
  };
}

/** Logs the startup summary and URL, then the agent-check port and the shared KV store when there are. */
function logStartup(handle: ServerHandle, host: string): void {
  for (const line of startupLogLines(handle.summary, handle.url)) log(line);
  if (handle.agentCheckPort !== undefined) {
    log(`HAProxy agent check on tcp port ${handle.agentCheckPort} of ${host} (load as JSON: ${handle.url}/load)`);
  }
  const kvStore = handle.engine.kvStoreConnector;
  if (kvStore !== null) {
    log(
      `shared KV store: ${kvStore.store.description} (lookup + fetch timeout ${kvStore.timeoutMs} ms + 100 ms/MB; ` +
        "eviction is the store's: maxmemory-policy allkeys-lru)",
    );
  }
}

/**
 * Resolves once a SIGINT/SIGTERM has shut the server down: it drains (503 for new requests, those in flight finish
 * within `drainTimeoutMs`), then closes. A second signal exits at once with status 1.
 */
function waitForShutdownSignal(handle: ServerHandle, drainTimeoutMs: number, stopStats: () => void): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    let shuttingDown = false;
    const onSignal = (signal: NodeJS.Signals): void => {
      if (shuttingDown) {
        process.stderr.write(`received ${signal} again: exiting now\n`);
        process.exit(1);
      }
      shuttingDown = true;
      log(
        `received ${signal}: shutting down (draining ${handle.context.numInFlight} requests in flight for at most ` +
          `${drainTimeoutMs / 1000} s; new requests get 503)`,
      );
      stopStats();
      handle.drain(drainTimeoutMs).then(() => {
        process.off('SIGINT', onSignal);
        process.off('SIGTERM', onSignal);
        log('shutdown complete');
        resolve();
      }, reject);
    };
    process.on('SIGINT', onSignal);
    process.on('SIGTERM', onSignal);
  });
}

/**
 * Every 10 s, when anything happened: prompt and generation throughput, queue lengths, KV usage of both tiers and
 * the prefix-cache hit rate, as vLLM's `LoggingStatLogger` prints them. Returns a function that stops it.
 */
function startStatsLogger(handle: ServerHandle): () => void {
  let last = handle.engine.getStats();
  const timer = setInterval(() => {
    const s = handle.engine.getStats();
    const seconds = (s.now - last.now) / 1000;
    const prompt = (s.promptTokens - last.promptTokens) / seconds;
    const gen = (s.generationTokens - last.generationTokens) / seconds;
    const queries = s.prefixCacheQueries - last.prefixCacheQueries;
    const active = s.numRunning + s.numWaiting + s.numSwapped > 0;
    if (active || prompt > 0 || gen > 0) {
      const hitRate = queries > 0 ? (100 * (s.prefixCacheHits - last.prefixCacheHits)) / queries : 0;
      log(
        `Avg prompt throughput: ${prompt.toFixed(1)} tokens/s, Avg generation throughput: ${gen.toFixed(1)} ` +
          `tokens/s, Running: ${s.numRunning} reqs, Swapped: ${s.numSwapped} reqs, Pending: ${s.numWaiting} reqs, ` +
          `GPU KV cache usage: ${(100 * s.gpuCacheUsage).toFixed(1)}%, CPU KV cache usage: ` +
          `${(100 * s.cpuCacheUsage).toFixed(1)}%, prefix cache hit rate: ${hitRate.toFixed(1)}%, ` +
          `RSS: ${(process.memoryUsage().rss / 2 ** 20).toFixed(0)} MiB`,
      );
    }
    last = s;
  }, 10_000);
  timer.unref();
  return () => clearInterval(timer);
}
