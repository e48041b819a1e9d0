/**
 * Compile-time checks (run by `npm run lint:tsc`, not by jest): each zod schema's output is
 * exactly its contract type. They live here, not beside the schemas, because an exported
 * assertion lands in the published declarations and fails a consumer's non-strict tsc (TS2344).
 */
import type { z } from 'zod';
import type { BatchRecord, Question } from '../../src/contracts';
import type { batchRecordSchema } from '../../src/io/batch-record';
import type { questionSchema } from '../../src/io/questions';

type Same<A, B> = (<T>() => T extends A ? 1 : 2) extends (<T>() => T extends B ? 1 : 2) ? true : false;
type Assert<T extends true> = T;

export type QuestionSchemaMatchesContract = Assert<Same<z.output<typeof questionSchema>, Question>>;
export type BatchRecordSchemaMatchesContract = Assert<Same<z.output<typeof batchRecordSchema>, BatchRecord>>;
