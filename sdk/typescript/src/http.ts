/**
 * HTTP for the client: `node:http`/`node:https` over one keep-alive agent per client, with Nagle
 * off (small requests are sent at once). The runner sends a few small requests per job; this path
 * costs about half the CPU per request of the global `fetch` (undici) in the runner's drain,
 * and on a worker sharing cores with others that CPU is throughput. Any `fetch`-compatible
 * function can replace it (`ClientOptions.fetch`).
 */
import http from "node:http";
import https from "node:https";

/** What the client reads of an answer. */
export interface HttpAnswer {
  status: number;
  statusText: string;
  header(name: string): string | null;
  text(): Promise<string>;
  /** The body as bytes (a binary Connect answer). */
  bytes(): Promise<Uint8Array>;
}

export interface HttpRequest {
  method: string;
  headers: Record<string, string>;
  body?: string | Uint8Array | undefined;
  signal?: AbortSignal | undefined;
}

export type HttpSend = ((url: URL, request: HttpRequest) => Promise<HttpAnswer>) & {
  /** Close idle keep-alive connections (they would otherwise hold the process a moment). */
  close?: () => void;
};

/** A sender over keep-alive agents (one for http, one for https). */
export function nodeHttp(maxSockets = 64): HttpSend {
  const options = { keepAlive: true, maxSockets, noDelay: true };
  const agents = { "http:": new http.Agent(options), "https:": new https.Agent(options) };
  const send: HttpSend = (url, request) =>
    new Promise<HttpAnswer>((resolve, reject) => {
      const secure = url.protocol === "https:";
      const headers: Record<string, string | number> = { ...request.headers };
      if (request.body !== undefined) {
        headers["content-length"] =
          typeof request.body === "string"
            ? Buffer.byteLength(request.body)
            : request.body.byteLength;
      }
      const req = (secure ? https : http).request(
        url,
        {
          method: request.method,
          headers,
          agent: secure ? agents["https:"] : agents["http:"],
          signal: request.signal,
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on("data", (chunk: Buffer) => chunks.push(chunk));
          res.on("error", reject);
          res.on("end", () => {
            const data = Buffer.concat(chunks);
            resolve({
              status: res.statusCode ?? 0,
              statusText: res.statusMessage ?? "",
              header: (name) => {
                const value = res.headers[name.toLowerCase()];
                return value === undefined ? null : Array.isArray(value) ? value.join(", ") : value;
              },
              text: () => Promise.resolve(data.toString("utf8")),
              bytes: () => Promise.resolve(data),
            });
          });
        },
      );
      req.on("error", reject);
      req.end(request.body);
    });
  send.close = () => {
    agents["http:"].destroy();
    agents["https:"].destroy();
  };
  return send;
}

/** A sender over a `fetch`-compatible function. */
export function fromFetch(fetchFn: typeof fetch): HttpSend {
  return async (url, request) => {
    const response = await fetchFn(url, {
      method: request.method,
      headers: request.headers,
      ...(request.body === undefined ? {} : { body: request.body }),
      ...(request.signal ? { signal: request.signal } : {}),
    });
    return {
      status: response.status,
      statusText: response.statusText,
      header: (name) => response.headers.get(name),
      text: () => response.text(),
      bytes: async () => new Uint8Array(await response.arrayBuffer()),
    };
  };
}
