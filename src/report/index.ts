export { renderReport } from './html';
export type { ReportOptions } from './html';
