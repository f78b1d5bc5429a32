import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { Type, type Static } from '@sinclair/typebox';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { LLMEngine } from '../engine/index.js';
import { SseStream } from '../http/sse-stream.js';
import { getBlockDetail } from './block-detail.js';
import { DashboardHub, type DashboardHubOptions } from './dashboard-hub.js';
import { DashboardError, UnknownBlockError } from './errors.js';

/**
 * Who may see the dashboard, when the server has an API key: given by the server (app.ts), which owns the key.
 */
export interface DashboardAccess {
  /** True when the request proves the key (its `Authorization` header or the session cookie). */
  isAllowed(request: FastifyRequest): boolean;
  /** The `Set-Cookie` value of a new session when `key` is the API key, else null. */
  login(key: string): string | null;
}

/** Options of {@link dashboardPlugin}. */
export interface DashboardPluginOptions extends DashboardHubOptions {
  /** The engine whose KV cache the page shows. */
  readonly engine: LLMEngine;
  /** When set, the dashboard asks for the API key once (login page) and then uses a session cookie. */
  readonly access?: DashboardAccess;
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
const CONTENT_SECURITY_POLICY =
  "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; " +
  "img-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'self'";

function asset(body: Buffer, contentType: string): Asset {
  return { body, contentType, etag: `"${createHash('sha1').update(body).digest('base64url')}"` };
}

/** Reads the page, its scripts and uPlot into memory. Throws when a file is missing (a broken install). */
async function loadAssets(): Promise<{
  page: Asset;
  loginPage: Asset;
  loginScript: Asset;
  files: Map<string, Asset>;
  vendor: Map<string, Asset>;
}> {
  const page = asset(await readFile(new URL('index.html', ASSET_DIR)), 'text/html; charset=utf-8');
  const loginPage = asset(await readFile(new URL('login.html', ASSET_DIR)), 'text/html; charset=utf-8');
  const loginScript = asset(await readFile(new URL('login.js', ASSET_DIR)), 'text/javascript; charset=utf-8');
  const files = new Map<string, Asset>();
  for (const [name, type] of Object.entries(PAGE_FILES))
    files.set(name, asset(await readFile(new URL(name, ASSET_DIR)), type));
  const require = createRequire(import.meta.url);
  const vendor = new Map<string, Asset>();
  for (const [name, { module, contentType }] of Object.entries(VENDOR_FILES)) {
    vendor.set(name, asset(await readFile(require.resolve(module)), contentType));
  }
  return { page, loginPage, loginScript, files, vendor };
}

function sendAsset(request: FastifyRequest, reply: FastifyReply, a: Asset): FastifyReply {
  void reply.header('etag', a.etag).header('cache-control', 'no-cache');
  if (request.headers['if-none-match'] === a.etag) return reply.code(304).send();
  return reply.type(a.contentType).send(a.body);
}

/** The login page's post: `{"api_key": "<key>"}`. */
const LOGIN_SCHEMA = Type.Object({ api_key: Type.String({ maxLength: 4096 }) });

/**
 * The live KV-cache dashboard as a fastify plugin. Routes:
 *
 * - `GET /` and `GET /dashboard`: the page (HTML); `GET /dashboard/assets/<file>`: its scripts and styles;
 *   `GET /dashboard/vendor/uPlot.esm.js` and `uPlot.min.css`: the chart library from node_modules.
 * - `GET /dashboard/api/events`: server-sent events — `hello`, then `snapshot` whenever the engine changed (at most
 *   `maxUpdatesPerSecond`, default 4) and `series` once a second (the hello carries the series recorded since
 *   the server started); see {@link DashboardHub}.
 * - `GET /dashboard/api/snapshot`: the current snapshot as JSON (the `snapshot` event's data).
 * - `GET /dashboard/api/blocks/:id`: one block's details for the tooltip ({@link getBlockDetail}); 404 for an id
 *   outside both tiers.
 *
 * With `access` (the server has an API key), every route needs the key or the session cookie (401 otherwise),
 * except the page routes, which serve a small login page instead, its script `GET /dashboard/login.js`, and
 * `POST /dashboard/login` (`{"api_key"}` → 204 with the session cookie, 401 for a wrong key). Once the cookie is
 * set the page, its fetches and its EventSource work unchanged. Every route is marked `config.access: 'dashboard'`
 * so the server's key check leaves them to this plugin.
 *
 * While no page is connected only the time series is recorded (one O(1) sample a second). The hub is decorated on the instance as `dashboardHub` for inspection,
 * and closed (streams ended, timers stopped) when the server closes.
 */
export async function dashboardPlugin(app: FastifyInstance, options: DashboardPluginOptions): Promise<void> {
  const { engine, access, ...hubOptions } = options;
  const hub = new DashboardHub(engine, hubOptions);
  const { page, loginPage, loginScript, files, vendor } = await loadAssets();
  app.decorate('dashboardHub', hub);
  app.addHook('preClose', async () => {
    hub.close();
  });

  /** Open routes (the login page's own) and guarded ones (everything else). */
  const open = { config: { access: 'dashboard' as const } };
  const guarded = {
    config: { access: 'dashboard' as const },
    onRequest: async (request: FastifyRequest): Promise<void> => {
      if (access !== undefined && !access.isAllowed(request)) {
        throw new DashboardError(
          401,
          'the dashboard needs the API key: open / in a browser and sign in, or send ' +
            '"Authorization: Bearer <key>"',
        );
      }
    },
  };

  const servePage = async (request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> => {
    void reply.header('content-security-policy', CONTENT_SECURITY_POLICY).header('x-content-type-options', 'nosniff');
    if (access !== undefined && !access.isAllowed(request)) {
      return reply.header('cache-control', 'no-store').type(loginPage.contentType).send(loginPage.body);
    }
    return sendAsset(request, reply, page);
  };
  app.get('/', open, servePage);
  app.get('/dashboard', open, servePage);
  app.get('/dashboard/', open, servePage);
  app.get('/dashboard/login.js', open, async (request, reply) => sendAsset(request, reply, loginScript));
  app.post<{ Body: Static<typeof LOGIN_SCHEMA> }>(
    '/dashboard/login',
    { ...open, schema: { body: LOGIN_SCHEMA } },
    async (request, reply) => {
      if (access === undefined)
        throw new DashboardError(404, 'this server has no API key: the dashboard needs no sign-in');
      const cookie = access.login(request.body.api_key);
      if (cookie === null) throw new DashboardError(401, 'invalid API key: give the key the server was started with');
      return reply.code(204).header('set-cookie', cookie).header('cache-control', 'no-store').send();
    },
  );

  app.get<{ Params: { file: string } }>('/dashboard/assets/:file', guarded, async (request, reply) => {
    const a = files.get(request.params.file);
    if (a === undefined)
      throw new DashboardError(404, `no dashboard asset named ${JSON.stringify(request.params.file)}`);
    return sendAsset(request, reply, a);
  });
  app.get<{ Params: { file: string } }>('/dashboard/vendor/:file', guarded, async (request, reply) => {
    const a = vendor.get(request.params.file);
    if (a === undefined) throw new DashboardError(404, `no vendored file named ${JSON.stringify(request.params.file)}`);
    return sendAsset(request, reply, a);
  });

  app.get('/dashboard/api/snapshot', guarded, async (_request, reply) =>
    reply.type('application/json; charset=utf-8').header('cache-control', 'no-store').send(hub.currentSnapshotText()),
  );

  app.get<{ Params: { id: string } }>('/dashboard/api/blocks/:id', guarded, async (request, reply) => {
    const raw = request.params.id;
    if (!/^\d{1,9}$/.test(raw))
      throw new UnknownBlockError(`block id must be a non-negative integer, got ${JSON.stringify(raw)}`);
    return reply.header('cache-control', 'no-store').send(getBlockDetail(engine, Number(raw)));
  });

  app.get('/dashboard/api/events', guarded, (_request, reply) => {
    reply.hijack();
    hub.addClient(
      new SseStream(reply.raw, {
        slowClient: 'skip',
        headers: { 'cache-control': 'no-store, no-transform' },
        retryMs: 2000,
      }),
    );
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
