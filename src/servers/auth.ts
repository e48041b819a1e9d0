/**
 * Bearer tokens of `mempo serve`, as the learner has them (learner/mempo_learner/__main__.py and
 * server.py): a bind off loopback needs a token, and a server with a token answers 401 to every
 * request without `Authorization: Bearer <token>` (GET /health excepted, as SGLang's `--api-key`
 * does), from the headers alone, before a byte of the body is read.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import { lookup } from 'node:dns/promises';
import type * as http from 'node:http';
import { BlockList, isIP } from 'node:net';
import { SERVER_TOKEN_ENV } from '../engines/http/options';
import { MempoError } from '../errors';

export { SERVER_TOKEN_ENV };

const LOOPBACK = new BlockList();
LOOPBACK.addSubnet('127.0.0.0', 8, 'ipv4');
LOOPBACK.addAddress('::1', 'ipv6');

/** Whether an IP address is a loopback one (127.0.0.0/8, ::1, and IPv4-mapped ::ffff:127.x.y.z). */
export function isLoopbackAddress(address: string): boolean {
  const v = isIP(address);
  return v !== 0 && LOOPBACK.check(address, v === 4 ? 'ipv4' : 'ipv6');
}

/** The addresses `host` binds to: itself when it is an IP address, else every address it resolves to. */
async function addressesOf(host: string): Promise<string[]> {
  const h = host.replace(/^\[(.*)\]$/, '$1');
  if (isIP(h) !== 0) return [h];
  try {
    return (await lookup(h, { all: true })).map((a) => a.address);
  } catch (err) {
    throw new MempoError('ERR_INVALID_OPTION', `--host ${host}: cannot resolve it (${(err as Error).message})`);
  }
}

/** A token as a header can carry it: visible ASCII, no spaces; an empty one is none. */
export function checkToken(token: string | undefined, where: string): string | undefined {
  if (token === undefined || token === '') return undefined;
  if (!/^[\x21-\x7e]+$/.test(token)) throw new MempoError('ERR_INVALID_OPTION', `${where}: a token must be visible ASCII characters without spaces (it travels in an HTTP header)`);
  return token;
}

/**
 * Refuses a bind to `host` without a token unless every address it names is a loopback one
 * (0.0.0.0 and :: are every interface): anyone who reaches the port could otherwise generate,
 * and swap the weights through POST /update_weights_from_disk (`mempo serve`), or read the corpus
 * and pages (`mempo serve-retriever`); `guarded` says what the token guards.
 */
export async function requireTokenOffLoopback(host: string, hasToken: boolean, guarded = 'generate or load weights (POST /update_weights_from_disk)'): Promise<void> {
  if (hasToken) return;
  const off = (await addressesOf(host)).filter((a) => !isLoopbackAddress(a));
  if (off.length === 0) return;
  throw new MempoError(
    'ERR_INVALID_OPTION',
    `--host ${host} is not a loopback address (${off.join(', ')}): give --token (or ${SERVER_TOKEN_ENV}), so that only clients sending ` +
      `'Authorization: Bearer <token>' can ${guarded}`,
  );
}

const digest = (s: string) => createHash('sha256').update(s, 'utf8').digest();

/** Checks `Authorization: Bearer <token>` in constant time (equal-length digests, so neither the bytes nor the length leak through timing). */
export function bearerMatches(req: http.IncomingMessage, token: string): boolean {
  const got = req.headers['authorization'] ?? '';
  const m = /^Bearer (.*)$/i.exec(got);
  return timingSafeEqual(digest(m?.[1] ?? ''), digest(token)) && m !== null;
}
