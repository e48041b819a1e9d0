/**
 * Pieces shared by mempo's HTTP servers (`mempo serve`, `mempo serve-retriever`):
 * a status-carrying request error, a size-limited body reader, JSON-object parsing with the
 * servers' wording, listening that resolves to the bound base URL, and the connection limits of
 * the learner's server (learner/mempo_learner/limits.py) for the servers that take them.
 */
import type * as http from 'node:http';
import type { Socket } from 'node:net';
import type { AddressInfo } from 'node:net';

/** A request the server refuses: `status` is the HTTP status, the message names the field. */
export class RequestError extends Error {
  constructor(readonly status: number, message: string) {
    super(message);
  }
}

/** The body as UTF-8; past `limit` bytes the rest is read and dropped so the client still gets its 413. */
export function readBody(req: http.IncomingMessage, limit: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) return reject(new RequestError(413, `request body larger than ${limit} bytes`));
      chunks.push(chunk);
    });
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

export function parseJsonObject(text: string): Record<string, unknown> {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    throw new RequestError(400, 'body is not valid JSON');
  }
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw new RequestError(400, 'body must be a JSON object');
  return body as Record<string, unknown>;
}

/**
 * Answers with a JSON body; a 413 or 401 also closes the connection (its request body was not
 * read in full, or at all), and a 401 names the scheme (`WWW-Authenticate: Bearer`).
 */
export function sendJson(res: http.ServerResponse, status: number, payload: unknown): void {
  const text = JSON.stringify(payload);
  const headers: http.OutgoingHttpHeaders = { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) };
  if (status === 413 || status === 401) headers['connection'] = 'close';
  if (status === 401) headers['www-authenticate'] = 'Bearer';
  res.writeHead(status, headers);
  res.end(text);
}

/** Listens on host:port (port 0 picks a free one); resolves to the base URL (http://host:port). */
export function listenOn(server: http.Server, port: number, host: string): Promise<string> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      const a = server.address() as AddressInfo;
      const h = a.family === 'IPv6' ? `[${a.address}]` : a.address;
      resolve(`http://${h}:${a.port}`);
    });
  });
}

/**
 * What one connection may cost, as the learner's server has it (learner/mempo_learner/limits.py):
 * a request's line and headers within 10 s, the whole request (headers and body) within 10 s,
 * at most 256 connections open at once, and a connection with no traffic either way for 60 s
 * (kept alive without a request, or an answer its client stopped reading) is closed. Node's
 * defaults were 60 s, 300 s, no cap and no idle limit: a trickling client held a connection for
 * minutes, and enough of them held every file descriptor.
 */
export const CONNECTION_LIMITS = { headersTimeoutMs: 10_000, requestTimeoutMs: 10_000, maxConnections: 256, idleTimeoutMs: 60_000 } as const;

/** `http.createServer` options with CONNECTION_LIMITS' timeouts, checked every second (Node checks every 30 s by default, so a 10 s limit could take 40). */
export function limitedServerOptions(): http.ServerOptions {
  return { headersTimeout: CONNECTION_LIMITS.headersTimeoutMs, requestTimeout: CONNECTION_LIMITS.requestTimeoutMs, connectionsCheckingInterval: 1_000 };
}

/**
 * At most `max` connections open at once: Node closes each one past it as it is accepted (the
 * learner instead closes its longest-idle one; here an idle one goes within the idle limit). A
 * connection without traffic for CONNECTION_LIMITS.idleTimeoutMs is destroyed, which also frees
 * an answer its client stopped reading.
 */
export function capConnections(server: http.Server, max: number = CONNECTION_LIMITS.maxConnections): http.Server {
  server.maxConnections = max;
  server.setTimeout(CONNECTION_LIMITS.idleTimeoutMs, (socket: Socket) => socket.destroy());
  return server;
}
