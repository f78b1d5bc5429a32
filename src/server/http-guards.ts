import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { ApiKeyAuth } from './api-key-auth.js';
import { MethodNotAllowedError, NotFoundError, ServiceUnavailableError } from './errors.js';
import type { HostAllowList } from './host-allow-list.js';
import type { RouteMethods } from './route-methods.js';

/**
 * Who may call a route, in its fastify `config.access`:
 * - absent: the API key is required (`Authorization: Bearer <key>`) when the server has one,
 * - `'public'`: no key (`GET /health`; `/metrics` with `--metrics-public`),
 * - `'dashboard'`: the dashboard plugin checks the key or its session cookie itself (dashboard-plugin.ts).
 */
export type RouteAccess = 'public' | 'dashboard';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** See {@link RouteAccess}. */
    access?: RouteAccess;
  }
}

/** Options of {@link httpGuards}. */
export interface HttpGuardsOptions {
  /** The API key's checks; null when the server has no key. */
  readonly auth: ApiKeyAuth | null;
  /** The Host allow-list; null when Host is not checked. */
  readonly hosts: HostAllowList | null;
  /** Every registered route's methods (for 405 vs 404). */
  readonly routes: RouteMethods;
  /** True when @fastify/cors is registered (its `OPTIONS *` preflight route is then open). */
  readonly corsEnabled: boolean;
  /** True once shutdown began: new requests get 503 while the ones in flight finish. */
  readonly isDraining: () => boolean;
}

/**
 * The checks every request passes before its body is read, in order: its Host (403), the API key on the route the
 * router matched (401; the matched route, not the raw URL, so `/%76%31/models` or an absolute-form target cannot
 * slip past), an unmatched path (405 with `Allow` when the path exists for other methods, else 404), and shutdown
 * (503). Registered as a plugin after @fastify/cors so its CORS headers are on these error answers too; those headers
 * are also put on the raw response, where streams (which write the raw response themselves) find them.
 *
 * Not encapsulated: its hooks apply to every route of the app it is registered on.
 */
export async function httpGuards(app: FastifyInstance, options: HttpGuardsOptions): Promise<void> {
  const { auth, hosts, routes, corsEnabled, isDraining } = options;
  app.addHook('onRequest', async (request, reply) => {
    const target = request.raw.url ?? '/';
    hosts?.check(request.headers.host, target);
    const preflight = corsEnabled && request.method === 'OPTIONS' && request.routeOptions.url === '*';
    if (auth !== null && request.routeOptions.config.access === undefined && !preflight) {
      auth.assertBearer(request.headers.authorization);
    }
    if (request.is404) throw unmatched(request, routes, target);
    if (isDraining()) throw new ServiceUnavailableError('the server is shutting down and accepts no new requests');
    if (corsEnabled) {
      for (const [name, value] of Object.entries(reply.getHeaders())) {
        if ((name.startsWith('access-control-') || name === 'vary') && value !== undefined)
          reply.raw.setHeader(name, value);
      }
    }
  });
}

function unmatched(request: FastifyRequest, routes: RouteMethods, target: string): Error {
  const allow = routes.allowedMethods(target);
  const path = target.split('?', 1)[0];
  if (allow.length > 0) {
    return new MethodNotAllowedError(`${request.method} is not allowed on ${path}: use ${allow.join(' or ')}`, allow);
  }
  return new NotFoundError(`no route for ${request.method} ${path}`);
}

// Not encapsulated (what the fastify-plugin package marks): the hooks belong to the app the plugin is registered on.
Object.defineProperty(httpGuards, Symbol.for('skip-override'), { value: true });
Object.defineProperty(httpGuards, Symbol.for('fastify.display-name'), { value: 'pagellm-http-guards' });
