/** Serving and driving OpenAI-compatible completions servers (vLLM, SGLang, `mempo serve`). */
export { createCompletionsServer, parseCompletionRequest, parseGenerateRequest } from './server';
export type { CompletionsServerOptions, CompletionRequest, GenerateRequest } from './server';
export { HttpCompletionsBackend, CompletionsBackendError, streamSeed, endpointUrl, serverBaseUrl, COMPLETIONS_APIS } from './client';
export type { HttpCompletionsOptions, CompletionsApi, BackendStats, EndpointStats } from './client';
export { connectCompletionsServers, listServedModels, serverUrls } from './connect';
export type { ServerBackendConfig } from './connect';
