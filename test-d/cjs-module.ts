// The package as `require('mempo')` types it (dist/index.d.ts), for the ESM comparison.
import * as mempo from 'mempo';
export { mempo };
