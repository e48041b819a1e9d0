/** The search tool: retrievers, observation rendering, round parsing. */
export { Bm25Retriever, corpusLineSchema } from './bm25';
export type { Bm25Options, CorpusDocument } from './bm25';
export { HttpRetriever } from './http';
export type { HttpRetrieverOptions } from './http';
export { renderSearchObservation } from './retriever';
export type { Retriever, RetrievedDoc, ObservationOptions } from './retriever';
export { parseRoundOutput } from './parse';
export type { ParsedRoundOutput, Violation, ViolationCode, RoundActionKind } from './parse';
export { MempoPipelineError } from './errors';
export type { PipelineErrorCode } from './errors';
export { readJsonl, parseJsonl } from './jsonl';
export { createRetrievalServer, parseRetrieveRequest, listen } from './retrieval-server';
export type { RetrievalServerOptions } from './retrieval-server';
