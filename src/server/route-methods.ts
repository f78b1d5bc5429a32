/**
 * The methods each registered path answers, so a request the router did not match can be told apart: a known path
 * with another method (405 with `Allow`) or no such path (404). Paths are fastify's patterns (`/dashboard/assets/:file`);
 * wildcard routes (`*`) are left out. Fed from fastify's `onRoute` hook.
 */
export class RouteMethods {
  private readonly routes = new Map<string, { pattern: RegExp; methods: Set<string> }>();

  /** Records one route (`method` may be a list, as fastify's route options give it). */
  add(method: string | readonly string[], url: string): void {
    if (url.includes('*')) return;
    let entry = this.routes.get(url);
    if (entry === undefined) {
      const source = url
        .split('/')
        .map((part) => (part.startsWith(':') ? '[^/]+' : escapeRegExp(part)))
        .join('/');
      entry = { pattern: new RegExp(`^${source}$`), methods: new Set() };
      this.routes.set(url, entry);
    }
    for (const m of typeof method === 'string' ? [method] : method) entry.methods.add(m.toUpperCase());
  }

  /**
   * The methods registered for the path of a raw request target (query dropped, percent-escapes decoded as the
   * router decodes them, an absolute-form target reduced to its path), sorted; empty when no route has that path.
   */
  allowedMethods(target: string): string[] {
    const path = pathOf(target);
    if (path === null) return [];
    const out = new Set<string>();
    for (const { pattern, methods } of this.routes.values()) {
      if (pattern.test(path)) for (const m of methods) out.add(m);
    }
    return [...out].sort();
  }
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/** The decoded path of a request target, or null when it cannot be decoded. */
function pathOf(target: string): string | null {
  let path = target;
  const scheme = path.indexOf('://');
  if (!path.startsWith('/') && scheme >= 0) {
    const slash = path.indexOf('/', scheme + 3);
    path = slash < 0 ? '/' : path.slice(slash);
  }
  path = path.split(/[?#]/, 1)[0];
  try {
    return decodeURIComponent(path);
  } catch {
    return null;
  }
}
