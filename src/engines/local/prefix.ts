/**
 * Prefix sharing for the scorer. In a MemPO batch the full contexts of one trajectory are
 * prefixes of each other (round r's context is the trajectory up to round r), and every memory
 * context starts with the same prompt as the full contexts of its question. An item that shares
 * a long prefix with another item's context (its host) needs no pass of its own over that
 * prefix: the host's pass already computed the keys and values of every prefix. The member is
 * scored from a slice of the host's cache plus a tail pass over the rest of its context and its
 * target.
 */

/** Ids of an item as the scorer prepared them. */
export interface PrefixItem {
  context: ArrayLike<number>;
}

/** A member of a host: `shared` leading context tokens equal the host's. */
export interface PrefixMember {
  pos: number;
  shared: number;
}

function sameIds(a: ArrayLike<number>, b: ArrayLike<number>, n: number): boolean {
  for (let i = 0; i < n; i++) if (a[i] !== b[i]) return false;
  return true;
}

const HASH0 = 0x811c9dc5;
function step(h: number, id: number, i: number): number {
  return (Math.imul(h ^ id, 0x01000193) + i) >>> 0;
}

/**
 * Assigns hosts and members (positions in `items`). Hosts are chosen among items whose context
 * is a prefix of (or equal to) another item's context, longest first, so each host is the
 * longest context of its chain; such items become members with `shared` = their context
 * length. Then every item still on its own joins the host with which it shares the longest
 * prefix, if that prefix has at least `minShared` tokens. Hosts are never members. Rolling
 * hashes over host prefixes; every match is checked id by id.
 */
export function findSharing<T extends PrefixItem>(items: readonly T[], minShared: number): Map<number, PrefixMember[]> {
  const byKey = new Map<string, number[]>();
  items.forEach((it, pos) => {
    let h = HASH0;
    for (let i = 0; i < it.context.length; i++) h = step(h, it.context[i]!, i);
    const key = `${it.context.length}:${h}`;
    const list = byKey.get(key);
    if (list === undefined) byKey.set(key, [pos]);
    else list.push(pos);
  });
  const order = items.map((_, pos) => pos).sort((a, b) => items[b]!.context.length - items[a]!.context.length || a - b);
  const claimed = new Uint8Array(items.length);
  const sharing = new Map<number, PrefixMember[]>();
  for (const hostPos of order) {
    if (claimed[hostPos]) continue;
    const host = items[hostPos]!;
    const members: PrefixMember[] = [];
    let h = HASH0;
    for (let len = 1; len <= host.context.length; len++) {
      h = step(h, host.context[len - 1]!, len - 1);
      const list = byKey.get(`${len}:${h}`);
      if (list === undefined) continue;
      for (const pos of list) {
        if (pos === hostPos || claimed[pos]) continue;
        if (!sameIds(items[pos]!.context, host.context, len)) continue;
        claimed[pos] = 1;
        members.push({ pos, shared: len });
      }
    }
    if (members.length > 0) {
      claimed[hostPos] = 1;
      sharing.set(hostPos, members);
    }
  }
  if (sharing.size === 0 || !Number.isFinite(minShared)) return sharing;

  // Longest common prefix with a host, for the items left on their own.
  const prefixOf = new Map<string, number>();
  for (const hostPos of sharing.keys()) {
    const ctx = items[hostPos]!.context;
    let h = HASH0;
    for (let len = 1; len <= ctx.length; len++) {
      h = step(h, ctx[len - 1]!, len - 1);
      const key = `${len}:${h}`;
      if (!prefixOf.has(key)) prefixOf.set(key, hostPos);
    }
  }
  items.forEach((it, pos) => {
    if (claimed[pos]) return;
    let h = HASH0;
    let best = 0;
    let bestHost = -1;
    for (let len = 1; len <= it.context.length; len++) {
      h = step(h, it.context[len - 1]!, len - 1);
      const hostPos = prefixOf.get(`${len}:${h}`);
      if (hostPos === undefined) break;
      best = len;
      bestHost = hostPos;
    }
    if (best < Math.max(1, minShared) || !sameIds(it.context, items[bestHost]!.context, best)) return;
    claimed[pos] = 1;
    sharing.get(bestHost)!.push({ pos, shared: best });
  });
  return sharing;
}
