// ES module entry: the same implementation as the CommonJS one (index.cjs), loaded through
// createRequire so that both entries share one module instance per thread count.
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const asyncnd = require('./index.cjs');

export const load = asyncnd.load;
export const supportsRelaxedSimd = asyncnd.supportsRelaxedSimd;
export const cpuLimit = asyncnd.cpuLimit;
export default asyncnd;
