import type { IncomingHttpHeaders } from "node:http";

/** Where the MCP endpoint's protected-resource metadata lives (RFC 9728 §3.1: the resource's path appended). */
export const MCP_RESOURCE_METADATA_PATH = "/.well-known/oauth-protected-resource/mcp";

/** RFC 9728 protected-resource metadata of the MCP endpoint. */
export interface ResourceMetadata {
  resource: string;
  authorization_servers: string[];
  bearer_methods_supported: ["header"];
  resource_name: string;
}

/**
 * The MCP endpoint's HTTP rules outside the protocol: which `Host` and `Origin` headers it accepts (DNS
 * rebinding: a page on another origin must not reach a local server through a name that resolves to it), and how
 * it tells an unauthenticated client where to get a token (RFC 9728 metadata named by `WWW-Authenticate`).
 */
export class McpHttpPolicy {
  readonly #hosts: Set<string>;
  readonly #origins: { scheme: string; host: string; port: string | undefined }[];
  readonly #publicUrl: string | undefined;
  readonly #authorizationServers: string[];

  constructor(options: {
    allowedHosts: readonly string[];
    allowedOrigins: readonly string[];
    publicUrl?: string | undefined;
    authorizationServers: readonly string[];
  }) {
    this.#hosts = new Set(options.allowedHosts.map((h) => h.toLowerCase()));
    this.#origins = options.allowedOrigins.map((origin) => {
      const url = new URL(origin);
      return { scheme: url.protocol, host: url.hostname.toLowerCase(), port: url.port === "" && !/:\d+\/?$/.test(origin) ? undefined : url.port };
    });
    this.#publicUrl = options.publicUrl?.replace(/\/+$/, "");
    this.#authorizationServers = [...options.authorizationServers];
  }

  /** Why a request with these headers is refused (403), or undefined when its Host and Origin are allowed. */
  refusal(headers: IncomingHttpHeaders): string | undefined {
    const host = hostName(headers.host);
    if (host === undefined || !this.#hosts.has(host)) return `Host ${JSON.stringify(headers.host ?? "")} is not allowed`;
    const origin = headers.origin;
    if (origin === undefined) return undefined;
    let url: URL;
    try {
      url = new URL(origin);
    } catch {
      return `Origin ${JSON.stringify(origin)} is not allowed`;
    }
    const allowed = this.#origins.some(
      (o) => o.scheme === url.protocol && o.host === url.hostname.toLowerCase() && (o.port === undefined || o.port === url.port),
    );
    return allowed ? undefined : `Origin ${JSON.stringify(origin)} is not allowed`;
  }

  /** The base URL clients reach this orchestrator by: the configured one, or the request's (allowed) Host. */
  baseUrl(headers: IncomingHttpHeaders, encrypted: boolean): string {
    return this.#publicUrl ?? `${encrypted ? "https" : "http"}://${headers.host ?? "127.0.0.1"}`;
  }

  /** The MCP endpoint's protected-resource metadata. */
  resourceMetadata(baseUrl: string): ResourceMetadata {
    return {
      resource: `${baseUrl}/mcp`,
      authorization_servers: this.#authorizationServers,
      bearer_methods_supported: ["header"],
      resource_name: "Toolgate MCP",
    };
  }

  /** The `WWW-Authenticate` of a 401 from the MCP endpoint (RFC 9728 §5.1). */
  wwwAuthenticate(baseUrl: string): string {
    return `Bearer resource_metadata="${baseUrl}${MCP_RESOURCE_METADATA_PATH}"`;
  }
}

/** The host name of a `Host` header, lower-cased, without its port (`[::1]` keeps its brackets). */
function hostName(host: string | undefined): string | undefined {
  if (!host) return undefined;
  const match = /^(\[[0-9a-fA-F:.]+\]|[^:[\]]+)(?::\d{1,5})?$/.exec(host.trim());
  return match?.[1]?.toLowerCase();
}
