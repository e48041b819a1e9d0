export { AgentMemory } from './agent-memory';
export type { AgentMemoryOptions, MemoryRecord, MemoryRecordType } from './agent-memory';
