import { HostNotAllowedError } from './errors.js';

/** Names a loopback-bound server always answers to. */
const LOOPBACK_NAMES = ['localhost', '127.0.0.1', '[::1]'];

/** Addresses that mean "every interface": the server is reachable under names it cannot know. */
const WILDCARD_HOSTS = new Set(['', '0.0.0.0', '::', '[::]']);

/** The lower-cased hostname of a `host[:port]` string (IPv6 in brackets), or null when it is not one. */
function hostnameOf(hostAndPort: string): string | null {
  if (hostAndPort.length === 0 || /[\s/?#@\\]/.test(hostAndPort)) return null;
  try {
    const url = new URL(`http://${hostAndPort}`);
    return url.hostname.toLowerCase();
  } catch {
    return null;
  }
}

/** A configured name (`example.com`, `10.0.0.5`, `::1`, `[::1]`, optionally with a port) as {@link hostnameOf} gives it. */
function configuredHostname(name: string): string | null {
  const bare = name.split(':').length > 2 && !name.startsWith('[') ? `[${name}]` : name;
  return hostnameOf(bare);
}

/**
 * The Host names the server answers to, against DNS rebinding: a web page on attacker.example whose name is made to
 * resolve to 127.0.0.1 reaches a local server, but its requests still say `Host: attacker.example`, so they are
 * refused (403). Any port is accepted with an allowed name.
 *
 * - Bound to a specific address (127.0.0.1 by default): `localhost`, `127.0.0.1`, `[::1]`, the bound host, and the
 *   names given with `--allowed-hosts`.
 * - Bound to every interface (0.0.0.0, ::): no check unless `--allowed-hosts` names hosts (then those plus the
 *   loopback names), because such a server is reached under names it cannot know.
 * - `--allowed-hosts '*'`: no check.
 *
 * An absolute-form request target (`GET http://other/v1/models`) names the host the request is for, so its host is
 * checked as well as the Host header.
 */
export class HostAllowList {
  private constructor(private readonly names: ReadonlySet<string>) {}

  /**
   * The list for a server bound to `bindHost`, widened by `allowedHosts`; null when nothing is checked.
   * @throws RangeError for an `allowedHosts` entry that is not a host name (e.g. a URL with a path).
   */
  static forBinding(bindHost: string, allowedHosts: readonly string[] | undefined): HostAllowList | null {
    if (allowedHosts?.includes('*') === true) return null;
    const wildcard = WILDCARD_HOSTS.has(bindHost.toLowerCase());
    if (wildcard && (allowedHosts === undefined || allowedHosts.length === 0)) return null;
    const names = new Set(LOOPBACK_NAMES);
    const bound = configuredHostname(bindHost);
    if (!wildcard && bound !== null) names.add(bound);
    for (const h of allowedHosts ?? []) {
      const name = configuredHostname(h);
      if (name === null)
        throw new RangeError(
          `--allowed-hosts: ${JSON.stringify(h)} is not a host name (give names like example.com or 10.0.0.5)`,
        );
      names.add(name);
    }
    return new HostAllowList(names);
  }

  /** The accepted host names (lower case, IPv6 in brackets). */
  get hostnames(): readonly string[] {
    return [...this.names];
  }

  /**
   * @param hostHeader the request's `Host` header.
   * @param target the raw request target (`/v1/models`, or absolute-form `http://host/v1/models`).
   * @throws HostNotAllowedError (403) when either names a host outside the list, or Host is missing.
   */
  check(hostHeader: string | undefined, target: string): void {
    const name = hostHeader === undefined ? null : hostnameOf(hostHeader);
    if (name === null || !this.names.has(name)) {
      throw new HostNotAllowedError(
        `this server does not answer to the host ${JSON.stringify(hostHeader ?? '')}: ` +
          `use one of ${this.hostnames.join(', ')}, or start it with --allowed-hosts <name>`,
      );
    }
    if (!target.startsWith('/') && target !== '*') {
      const schemeEnd = target.indexOf('://');
      const authority = schemeEnd < 0 ? '' : target.slice(schemeEnd + 3).split(/[/?#]/, 1)[0];
      const targetName = hostnameOf(authority);
      if (targetName === null || !this.names.has(targetName)) {
        throw new HostNotAllowedError(
          `this server does not answer to the request target's host ` +
            `${JSON.stringify(authority)}: send the path only (e.g. /v1/models) or use one of ${this.hostnames.join(', ')}`,
        );
      }
    }
  }
}
