/**
 * Pieces shared by mempo's HTTP servers (`mempo serve`, `mempo serve-retriever`):
 * a status-carrying request error, a size-limited body reader, JSON-object parsing with the
 * servers' wording, and listening that resolves to the bound base URL.
 */
import type * as http from 'node:http';
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
