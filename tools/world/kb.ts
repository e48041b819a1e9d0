/**
 * Knowledge base of the embedded synthetic world: fictional people, organisations,
 * cities, countries and works, with functional relations between them. Deterministic
 * from a seed. The world is split into disjoint components (`train`, `dev`, `test`):
 * relations never cross components, so questions of different splits share no entity.
 */
import { SeededRandom } from '../../src/rng';

export type EntityType = 'person' | 'org' | 'city' | 'country' | 'work';
export type Split = 'train' | 'dev' | 'test';
export const SPLITS: readonly Split[] = ['train', 'dev', 'test'];

export interface Entity {
  id: string;
  type: EntityType;
  name: string;
  split: Split;
}

export interface RelationDef {
  id: string;
  subject: EntityType;
  object: EntityType | 'year';
  /** Fact sentence (document text and memory). */
  sentence: (s: string, o: string) => string;
  /** Direct question about the subject. */
  question: (s: string) => string;
  /** Noun phrase naming the object, for nesting in multi-hop questions (entity objects only). */
  nounPhrase: ((s: string) => string) | null;
  /** Oracle search query. */
  query: (s: string) => string;
  /** Oracle reasoning before searching this relation. */
  think: (s: string) => string;
}

export const RELATIONS: readonly RelationDef[] = [
  {
    id: 'born_in', subject: 'person', object: 'city',
    sentence: (s, o) => `${s} was born in ${o}.`,
    question: (s) => `Where was ${s} born?`,
    nounPhrase: (s) => `the birthplace of ${s}`,
    query: (s) => `${s} born`,
    think: (s) => `Find where ${s} was born.`,
  },
  {
    id: 'works_for', subject: 'person', object: 'org',
    sentence: (s, o) => `${s} works for ${o}.`,
    question: (s) => `Which organisation does ${s} work for?`,
    nounPhrase: (s) => `the employer of ${s}`,
    query: (s) => `${s} works for`,
    think: (s) => `Find the employer of ${s}.`,
  },
  {
    id: 'spouse', subject: 'person', object: 'person',
    sentence: (s, o) => `${s} is married to ${o}.`,
    question: (s) => `Who is ${s} married to?`,
    nounPhrase: (s) => `the spouse of ${s}`,
    query: (s) => `${s} married to`,
    think: (s) => `Find the spouse of ${s}.`,
  },
  {
    id: 'founder', subject: 'org', object: 'person',
    sentence: (s, o) => `${s} was founded by ${o}.`,
    question: (s) => `Who founded ${s}?`,
    nounPhrase: (s) => `the founder of ${s}`,
    query: (s) => `${s} founded by`,
    think: (s) => `Find the founder of ${s}.`,
  },
  {
    id: 'based_in', subject: 'org', object: 'city',
    sentence: (s, o) => `${s} is based in ${o}.`,
    question: (s) => `Where is ${s} based?`,
    nounPhrase: (s) => `the home city of ${s}`,
    query: (s) => `${s} based in`,
    think: (s) => `Find where ${s} is based.`,
  },
  {
    id: 'established', subject: 'org', object: 'year',
    sentence: (s, o) => `${s} was established in ${o}.`,
    question: (s) => `In what year was ${s} established?`,
    nounPhrase: null,
    query: (s) => `${s} established`,
    think: (s) => `Find when ${s} was established.`,
  },
  {
    id: 'country', subject: 'city', object: 'country',
    sentence: (s, o) => `${s} is a city in ${o}.`,
    question: (s) => `In which country is ${s}?`,
    nounPhrase: (s) => `the country of ${s}`,
    query: (s) => `${s} city in country`,
    think: (s) => `Find the country of ${s}.`,
  },
  {
    id: 'mayor', subject: 'city', object: 'person',
    sentence: (s, o) => `${s} is governed by ${o}.`,
    question: (s) => `Who governs ${s}?`,
    nounPhrase: (s) => `the governor of ${s}`,
    query: (s) => `${s} governed by`,
    think: (s) => `Find the governor of ${s}.`,
  },
  {
    id: 'capital', subject: 'country', object: 'city',
    sentence: (s, o) => `${s} has its capital in ${o}.`,
    question: (s) => `What is the capital of ${s}?`,
    nounPhrase: (s) => `the capital of ${s}`,
    query: (s) => `${s} capital`,
    think: (s) => `Find the capital of ${s}.`,
  },
  {
    id: 'author', subject: 'work', object: 'person',
    sentence: (s, o) => `${s} was written by ${o}.`,
    question: (s) => `Who wrote ${s}?`,
    nounPhrase: (s) => `the author of ${s}`,
    query: (s) => `${s} written by`,
    think: (s) => `Find the author of ${s}.`,
  },
  {
    id: 'publisher', subject: 'work', object: 'org',
    sentence: (s, o) => `${s} was published by ${o}.`,
    question: (s) => `Who published ${s}?`,
    nounPhrase: (s) => `the publisher of ${s}`,
    query: (s) => `${s} published by`,
    think: (s) => `Find the publisher of ${s}.`,
  },
  {
    id: 'released', subject: 'work', object: 'year',
    sentence: (s, o) => `${s} was released in ${o}.`,
    question: (s) => `In what year was ${s} released?`,
    nounPhrase: null,
    query: (s) => `${s} released`,
    think: (s) => `Find when ${s} was released.`,
  },
];

export const RELATION_BY_ID: ReadonlyMap<string, RelationDef> = new Map(RELATIONS.map((r) => [r.id, r]));

export function relation(id: string): RelationDef {
  const r = RELATION_BY_ID.get(id);
  if (!r) throw new Error(`unknown relation ${id}`);
  return r;
}

/** Relations of each entity type, in document order. */
export function relationsOf(type: EntityType): RelationDef[] {
  return RELATIONS.filter((r) => r.subject === type);
}

// ---------------------------------------------------------------- names

const ONSETS = ['b', 'd', 'f', 'g', 'h', 'k', 'l', 'm', 'n', 'p', 'r', 's', 't', 'v', 'z', 'br', 'dr', 'kr', 'st', 'th', 'j', 'w'];
const VOWELS = ['a', 'e', 'i', 'o', 'u', 'a', 'e', 'o', 'ai', 'ei'];
const CODAS = ['', '', '', 'n', 'r', 'l', 's', 'k', 'm', 'th'];

export const ORG_SUFFIXES = ['Group', 'Press', 'Guild', 'Bank', 'Works', 'Studio', 'Company', 'Institute'];
export const CITY_SUFFIXES = ['Falls', 'Springs', 'Heights', 'Crossing', 'Bay', 'Ridge', 'Point', 'Landing'];
export const COUNTRY_SUFFIXES = ['Republic', 'Kingdom', 'Union', 'Federation'];
export const WORK_ADJECTIVES = [
  'Silent', 'Golden', 'Hidden', 'Broken', 'Last', 'Distant', 'Burning', 'Frozen', 'Quiet', 'Wild',
  'Crimson', 'Hollow', 'Secret', 'Endless', 'Iron', 'Silver', 'Bitter', 'Lost', 'Pale', 'Restless',
  'Amber', 'Gentle', 'Northern', 'Sunken', 'Scarlet', 'Velvet', 'Ancient', 'Painted', 'Shining', 'Weary',
];
export const WORK_NOUNS = [
  'Orchard', 'River', 'Tower', 'Garden', 'Harbor', 'Mirror', 'Winter', 'Lantern', 'Forest', 'Crown',
  'Bridge', 'Voyage', 'Island', 'Letter', 'Mountain', 'Shadow', 'Engine', 'Song', 'Window', 'Empire',
  'Valley', 'Storm', 'Feather', 'Castle', 'Meadow', 'Compass', 'Tide', 'Ember', 'Chapel', 'Desert',
];
/** Years of `established` / `released` facts. */
export const YEAR_RANGE = { first: 1700, last: 2019 } as const;

function syllable(rng: SeededRandom): string {
  return rng.pick(ONSETS) + rng.pick(VOWELS) + rng.pick(CODAS);
}

function cap(s: string): string {
  return s.charAt(0).toUpperCase() + s.slice(1);
}

/** Seed of the name-piece pool: fixed, so every world (any seed) draws on the same pieces. */
const NAME_PIECE_SEED = 77;
const NAME_PIECE_COUNT = 320;
/** Words of the templates and suffix lists that a name piece must not equal. */
const RESERVED_WORDS = new Set(
  [...ORG_SUFFIXES, ...CITY_SUFFIXES, ...COUNTRY_SUFFIXES, ...WORK_ADJECTIVES, ...WORK_NOUNS].map((w) => w.toLowerCase()),
);

/**
 * The fictional words every entity name is built from (two syllables, 4-8 letters). Names of
 * different entities (and of different splits) recombine the same pieces, and each piece is
 * one token of the shipped tokenizer: a model that reads "Tolvek Dramin" in a document copies
 * two tokens it has seen in many contexts, instead of memorising whole names — so names of
 * unseen (test) entities are no harder to copy than training names.
 */
export const NAME_PIECES: readonly string[] = (() => {
  const rng = new SeededRandom(NAME_PIECE_SEED);
  const out: string[] = [];
  const seen = new Set<string>();
  while (out.length < NAME_PIECE_COUNT) {
    const w = cap(syllable(rng) + syllable(rng));
    const lw = w.toLowerCase();
    if (w.length < 4 || w.length > 8 || seen.has(lw) || RESERVED_WORDS.has(lw)) continue;
    seen.add(lw);
    out.push(w);
  }
  return out;
})();

// ---------------------------------------------------------------- KB

export interface Fact {
  subject: string; // entity id
  relation: string; // relation id
  object: string; // entity id, or year as string
}

export interface KB {
  seed: number;
  entities: Entity[];
  byId: Map<string, Entity>;
  /** subject id -> relation id -> object (entity id or year string). */
  facts: Map<string, Map<string, string>>;
}

export interface WorldSizes {
  person: number;
  org: number;
  city: number;
  country: number;
  work: number;
}

export const DEFAULT_SIZES: Record<Split, WorldSizes> = {
  train: { person: 1000, org: 330, city: 220, country: 36, work: 480 },
  dev: { person: 60, org: 22, city: 16, country: 4, work: 30 },
  test: { person: 140, org: 48, city: 36, country: 7, work: 70 },
};

/** Display name of an object value (entity name or year). */
export function objectName(kb: KB, relId: string, obj: string): string {
  const r = relation(relId);
  if (r.object === 'year') return obj;
  const e = kb.byId.get(obj);
  if (!e) throw new Error(`missing entity ${obj}`);
  return e.name;
}

export function buildKB(seed: number, sizes: Record<Split, WorldSizes> = DEFAULT_SIZES): KB {
  const rng = new SeededRandom(seed);
  const used = new Set<string>();
  const entities: Entity[] = [];
  const byId = new Map<string, Entity>();
  const facts = new Map<string, Map<string, string>>();
  const piece = (): string => rng.pick(NAME_PIECES);

  function add(type: EntityType, split: Split, name: string): Entity {
    const id = `${type}-${entities.length}`;
    const e: Entity = { id, type, name, split };
    entities.push(e);
    byId.set(id, e);
    used.add(name);
    return e;
  }
  /** A fresh full name (entity names are unique world-wide; their pieces are shared). */
  function fresh(make: () => string): string {
    for (;;) {
      const n = make();
      if (!used.has(n)) return n;
    }
  }

  const pools: Record<Split, Record<EntityType, Entity[]>> = {
    train: { person: [], org: [], city: [], country: [], work: [] },
    dev: { person: [], org: [], city: [], country: [], work: [] },
    test: { person: [], org: [], city: [], country: [], work: [] },
  };

  for (const split of SPLITS) {
    const sz = sizes[split];
    const P = pools[split];
    for (let i = 0; i < sz.person; i++) {
      // "A B" and "B A" would be the same bag of words to BM25: never both
      P.person.push(add('person', split, fresh(() => {
        const f = piece();
        let l = piece();
        while (l === f || used.has(`${l} ${f}`)) l = piece();
        return `${f} ${l}`;
      })));
    }
    for (let i = 0; i < sz.org; i++) P.org.push(add('org', split, fresh(() => `${piece()} ${rng.pick(ORG_SUFFIXES)}`)));
    for (let i = 0; i < sz.city; i++) P.city.push(add('city', split, fresh(() => `${piece()} ${rng.pick(CITY_SUFFIXES)}`)));
    for (let i = 0; i < sz.country; i++) {
      P.country.push(add('country', split, fresh(() => `${piece()} ${rng.pick(COUNTRY_SUFFIXES)}`)));
    }
    for (let i = 0; i < sz.work; i++) {
      for (;;) {
        const name = `The ${rng.pick(WORK_ADJECTIVES)} ${rng.pick(WORK_NOUNS)}`;
        if (used.has(name)) continue;
        P.work.push(add('work', split, name));
        break;
      }
    }
  }

  function set(s: Entity, rel: string, o: string): void {
    let m = facts.get(s.id);
    if (!m) {
      m = new Map();
      facts.set(s.id, m);
    }
    m.set(rel, o);
  }

  for (const split of SPLITS) {
    const P = pools[split];
    // countries and capitals
    const cities = P.city.slice();
    P.city.forEach((c, i) => {
      const country = P.country[i % P.country.length] as Entity;
      set(c, 'country', country.id);
    });
    P.country.forEach((c) => {
      const inCountry = cities.filter((x) => facts.get(x.id)?.get('country') === c.id);
      set(c, 'capital', rng.pick(inCountry).id);
    });
    // mayors: distinct people
    const mayors = rng.shuffle(P.person.slice());
    P.city.forEach((c, i) => set(c, 'mayor', (mayors[i % mayors.length] as Entity).id));
    // people
    for (const p of P.person) {
      set(p, 'born_in', rng.pick(P.city).id);
      set(p, 'works_for', rng.pick(P.org).id);
    }
    const spouses = rng.shuffle(P.person.slice());
    for (let i = 0; i + 1 < spouses.length; i += 2) {
      const a = spouses[i] as Entity;
      const b = spouses[i + 1] as Entity;
      set(a, 'spouse', b.id);
      set(b, 'spouse', a.id);
    }
    // orgs
    for (const o of P.org) {
      set(o, 'founder', rng.pick(P.person).id);
      set(o, 'based_in', rng.pick(P.city).id);
      set(o, 'established', String(YEAR_RANGE.first + rng.int(300)));
    }
    // works
    for (const w of P.work) {
      set(w, 'author', rng.pick(P.person).id);
      set(w, 'publisher', rng.pick(P.org).id);
      set(w, 'released', String(YEAR_RANGE.first + 50 + rng.int(270)));
    }
  }
  return { seed, entities, byId, facts };
}

/** The object of (subject, relation), or undefined when the fact does not exist. */
export function factObject(kb: KB, subjectId: string, relId: string): string | undefined {
  return kb.facts.get(subjectId)?.get(relId);
}

/** Fact sentence as written in documents and memory. */
export function factSentence(kb: KB, subjectId: string, relId: string): string {
  const s = kb.byId.get(subjectId);
  const o = factObject(kb, subjectId, relId);
  if (!s || o === undefined) throw new Error(`no fact ${subjectId} ${relId}`);
  return relation(relId).sentence(s.name, objectName(kb, relId, o));
}

export interface CorpusDoc {
  id: string;
  title: string;
  contents: string;
}

/** One document per entity: title = name, contents = all its outgoing fact sentences. */
export function renderCorpus(kb: KB): CorpusDoc[] {
  return kb.entities.map((e, i) => {
    const sentences = relationsOf(e.type)
      .filter((r) => factObject(kb, e.id, r.id) !== undefined)
      .map((r) => factSentence(kb, e.id, r.id));
    return { id: String(i), title: e.name, contents: sentences.join(' ') };
  });
}
