/** Serving and driving OpenAI-compatible completions servers (vLLM, SGLang, `mempo serve`). */
export { createCompletionsServer, parseCompletionRequest } from './server';
export type { CompletionsServerOptions, CompletionRequest } from './server';
export { HttpCompletionsBackend, CompletionsBackendError } from './client';
export type { HttpCompletionsOptions } from './client';
