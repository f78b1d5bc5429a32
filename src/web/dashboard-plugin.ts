import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { LLMEngine } from '../engine/index.js';
import { getBlockDetail } from './block-detail.js';
import { DashboardHub, type DashboardHubOptions } from './dashboard-hub.js';
import { DashboardError, UnknownBlockError } from './errors.js';

/** Options of {@link dashboardPlugin}. */
export interface DashboardPluginOptions extends DashboardHubOptions {
  /** The engine whose KV cache the page shows. */
  readonly engine: LLMEngine;
}

/** A file the page loads, kept in memory. */
interface Asset {
  readonly body: Buffer;
  readonly contentType: string;
  readonly etag: string;
}

const ASSET_DIR = new URL('./assets/', import.meta.url);

/** The page's own files, served under /dashboard/assets/. */
const PAGE_FILES: Readonly<Record<string, string>> = {
  'dashboard.css': 'text/css; charset=utf-8',
  'dashboard.js': 'text/javascript; charset=utf-8',
  'block-grid.js': 'text/javascript; charset=utf-8',
  'snapshot-codec.js': 'text/javascript; charset=utf-8',
  'charts.js': 'text/javascript; charset=utf-8',
  'request-table.js': 'text/javascript; charset=utf-8',
  'colors.js': 'text/javascript; charset=utf-8',
  'favicon.svg': 'image/svg+xml',
};

/** uPlot, served from node_modules under /dashboard/vendor/ (no CDN: the page works offline). */
const VENDOR_FILES: Readonly<Record<string, { module: string; contentType: string }>> = {
  'uPlot.esm.js': { module: 'uplot/dist/uPlot.esm.js', contentType: 'text/javascript; charset=utf-8' },
  'uPlot.min.css': { module: 'uplot/dist/uPlot.min.css', contentType: 'text/css; charset=utf-8' },
};

/** Only this origin's scripts, styles and connections: the page needs nothing else. */
const CONTENT_SECURITY_POLICY = "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; " +
  "img-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'self'";

function asset(body: Buffer, contentType: string): Asset {
  return { body, contentType, etag: `"${createHash('sha1').update(body).digest('base64url')}"` };
}

/** Reads the page, its scripts and uPlot into memory. Throws when a file is missing (a broken install). */
async function loadAssets(): Promise<{ page: Asset; files: Map<string, Asset>; vendor: Map<string, Asset> }> {
  const page = asset(await readFile(new URL('index.html', ASSET_DIR)), 'text/html; charset=utf-8');
  const files = new Map<string, Asset>();
  for (const [name, type] of Object.entries(PAGE_FILES)) files.set(name, asset(await readFile(new URL(name, ASSET_DIR)), type));
  const require = createRequire(import.meta.url);
  const vendor = new Map<string, Asset>();
  for (const [name, { module, contentType }] of Object.entries(VENDOR_FILES)) {
    vendor.set(name, asset(await readFile(require.resolve(module)), contentType));
  }
  return { page, files, vendor };
}

function sendAsset(request: FastifyRequest, reply: FastifyReply, a: Asset): FastifyReply {
  void reply.header('etag', a.etag).header('cache-control', 'no-cache');
  if (request.headers['if-none-match'] === a.etag) return reply.code(304).send();
  return reply.type(a.contentType).send(a.body);
}

/**
 * The live KV-cache dashboard as a fastify plugin. Routes:
 *
 * - `GET /` and `GET /dashboard`: the page (HTML); `GET /dashboard/assets/<file>`: its scripts and styles;
 *   `GET /dashboard/vendor/uPlot.esm.js` and `uPlot.min.css`: the chart library from node_modules.
 * - `GET /dashboard/api/events`: server-sent events — `hello`, then `snapshot` whenever the engine changed (at most
 *   `maxUpdatesPerSecond`, default 4) and `series` once a second; see {@link DashboardHub}.
 * - `GET /dashboard/api/snapshot`: the current snapshot as JSON (the `snapshot` event's data).
 * - `GET /dashboard/api/blocks/:id`: one block's details for the tooltip ({@link getBlockDetail}); 404 for an id
 *   outside both tiers.
 *
 * Nothing runs while no page is connected. The hub is decorated on the instance as `dashboardHub` for inspection,
 * and closed (streams ended, timers stopped) when the server closes.
 */
export async function dashboardPlugin(app: FastifyInstance, options: DashboardPluginOptions): Promise<void> {
  const { engine, ...hubOptions } = options;
  const hub = new DashboardHub(engine, hubOptions);
  const { page, files, vendor } = await loadAssets();
  app.decorate('dashboardHub', hub);
  app.addHook('preClose', async () => {
    hub.close();
  });

  const servePage = async (request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> => {
    void reply.header('content-security-policy', CONTENT_SECURITY_POLICY).header('x-content-type-options', 'nosniff');
    return sendAsset(request, reply, page);
  };
  app.get('/', servePage);
  app.get('/dashboard', servePage);
  app.get('/dashboard/', servePage);

  app.get<{ Params: { file: string } }>('/dashboard/assets/:file', async (request, reply) => {
    const a = files.get(request.params.file);
    if (a === undefined) throw new DashboardError(404, `no dashboard asset named ${JSON.stringify(request.params.file)}`);
    return sendAsset(request, reply, a);
  });
  app.get<{ Params: { file: string } }>('/dashboard/vendor/:file', async (request, reply) => {
    const a = vendor.get(request.params.file);
    if (a === undefined) throw new DashboardError(404, `no vendored file named ${JSON.stringify(request.params.file)}`);
    return sendAsset(request, reply, a);
  });

  app.get('/dashboard/api/snapshot', async (_request, reply) =>
    reply.type('application/json; charset=utf-8').header('cache-control', 'no-store').send(hub.currentSnapshotText()));

  app.get<{ Params: { id: string } }>('/dashboard/api/blocks/:id', async (request, reply) => {
    const raw = request.params.id;
    if (!/^\d{1,9}$/.test(raw)) throw new UnknownBlockError(`block id must be a non-negative integer, got ${JSON.stringify(raw)}`);
    return reply.header('cache-control', 'no-store').send(getBlockDetail(engine, Number(raw)));
  });

  app.get('/dashboard/api/events', (request, reply) => {
    reply.hijack();
    const res = reply.raw;
    res.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-store, no-transform',
      connection: 'keep-alive',
      'x-accel-buffering': 'no',
    });
    res.write('retry: 2000\n\n');
    const sink = res;
    const done = (): void => hub.removeClient(sink);
    request.raw.once('close', done);
    res.once('close', done);
    res.once('error', done);
    hub.addClient(sink);
  });
}

// Not encapsulated (what the fastify-plugin package marks): the decoration and the close hook belong to the app
// the plugin is registered on, so `app.dashboardHub` is visible there.
Object.defineProperty(dashboardPlugin, Symbol.for('skip-override'), { value: true });
Object.defineProperty(dashboardPlugin, Symbol.for('fastify.display-name'), { value: 'pagellm-dashboard' });

declare module 'fastify' {
  interface FastifyInstance {
    /** The dashboard's event hub (set by dashboardPlugin). */
    dashboardHub?: DashboardHub;
  }
}

/** Where the page's files live (for tests and packaging). */
export const DASHBOARD_ASSET_DIR = fileURLToPath(ASSET_DIR);
