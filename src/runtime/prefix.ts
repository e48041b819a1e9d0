/**
 * Prefix sharing for the scorer. In a MemPO batch the full contexts of one trajectory are
 * prefixes of each other (round r's context is the trajectory up to round r), and every item of
 * a trajectory carries the same target. An item whose context is a prefix of a longer item's
 * context (the host) needs no pass of its own over that context: the host's pass already
 * computed the keys and values of every prefix. The member is scored from a slice of the host's
 * cache plus a short tail pass over [last context token, target[0 .. t-2]].
 */

/** Ids of an item as the scorer prepared them. */
export interface PrefixItem {
  index: number;
  context: ArrayLike<number>;
}

function sameIds(a: ArrayLike<number>, b: ArrayLike<number>, n: number): boolean {
  for (let i = 0; i < n; i++) if (a[i] !== b[i]) return false;
  return true;
}

/**
 * Groups items into hosts and members: every member's context is a prefix of (or equal to) its
 * host's context, and a host is never a member. Items are visited longest context first, so
 * each host is the longest context of its chain. Returns host position -> member positions
 * (positions in `items`); items in neither role map nowhere. O(total host tokens) with a rolling
 * hash, every hash hit checked id by id.
 */
export function findPrefixChains<T extends PrefixItem>(items: readonly T[]): Map<number, number[]> {
  const byKey = new Map<string, number[]>();
  items.forEach((it, pos) => {
    let h = 0x811c9dc5;
    for (let i = 0; i < it.context.length; i++) h = (Math.imul(h ^ it.context[i]!, 0x01000193) + i) >>> 0;
    const key = `${it.context.length}:${h}`;
    const list = byKey.get(key);
    if (list === undefined) byKey.set(key, [pos]);
    else list.push(pos);
  });
  const order = items.map((_, pos) => pos).sort((a, b) => items[b]!.context.length - items[a]!.context.length || a - b);
  const claimed = new Uint8Array(items.length);
  const chains = new Map<number, number[]>();
  for (const hostPos of order) {
    if (claimed[hostPos]) continue;
    const host = items[hostPos]!;
    const members: number[] = [];
    let h = 0x811c9dc5;
    for (let len = 1; len <= host.context.length; len++) {
      h = (Math.imul(h ^ host.context[len - 1]!, 0x01000193) + (len - 1)) >>> 0;
      const list = byKey.get(`${len}:${h}`);
      if (list === undefined) continue;
      for (const pos of list) {
        if (pos === hostPos || claimed[pos]) continue;
        if (!sameIds(items[pos]!.context, host.context, len)) continue;
        claimed[pos] = 1;
        members.push(pos);
      }
    }
    if (members.length > 0) {
      claimed[hostPos] = 1;
      chains.set(hostPos, members);
    }
  }
  return chains;
}
