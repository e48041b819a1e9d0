/**
 * Answer text: the memory-reward target (docs/algorithm.md §4) and multi-objective answers, all
 * in one `<answer>`, in the question's order, joined by `", "`.
 */

/** Separator between the answers of a multi-objective question. */
export const MULTI_ANSWER_SEPARATOR = ', ';
/**
 * Memory-reward target template (docs/algorithm.md §4); `{answer}` is replaced by the gold
 * answer. It follows `</mem>` directly, exactly like a real answer round does.
 */
export const ANSWER_TEMPLATE = '<answer>{answer}</answer>';

/** Memory-reward target for a gold answer (docs/algorithm.md §4). */
export function renderAnswerTarget(gold: string, template: string = ANSWER_TEMPLATE): string {
  return template.replace('{answer}', gold);
}

/** Split a multi-objective answer into its parts. */
export function splitAnswers(answer: string): string[] {
  return answer.split(',').map((s) => s.trim()).filter((s) => s.length > 0);
}
