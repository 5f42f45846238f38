// vendor.mjs: copies the playground's libraries from web/node_modules (installed by `npm ci` from
// web/package-lock.json) into web/vendor/, which the page loads: the page needs no internet.
// Run by `make playground` and `make test-web`; web/vendor/ is not committed.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const modules = path.join(here, 'node_modules');
const out = path.join(here, 'vendor');

// [file under node_modules, name in vendor/]: browser (UMD) builds, loaded as classic scripts.
const FILES = [
  ['chart.js/dist/chart.umd.min.js', 'chart.umd.min.js'],
  ['hammerjs/hammer.min.js', 'hammer.min.js'],
  ['chartjs-plugin-zoom/dist/chartjs-plugin-zoom.min.js', 'chartjs-plugin-zoom.min.js'],
  ['cytoscape/dist/cytoscape.min.js', 'cytoscape.min.js'],
  ['dagre/dist/dagre.min.js', 'dagre.min.js'],
  ['cytoscape-dagre/cytoscape-dagre.js', 'cytoscape-dagre.js'],
  ['codemirror/lib/codemirror.js', 'codemirror.js'],
  ['codemirror/lib/codemirror.css', 'codemirror.css'],
  ['codemirror/mode/javascript/javascript.js', 'codemirror-javascript.js'],
  ['codemirror/addon/edit/matchbrackets.js', 'codemirror-matchbrackets.js'],
  ['codemirror/addon/edit/closebrackets.js', 'codemirror-closebrackets.js'],
];

const missing = FILES.filter(([src]) => !fs.existsSync(path.join(modules, src)));
if (missing.length) {
  console.error(`vendor: missing in web/node_modules: ${missing.map(([s]) => s).join(', ')}\n` +
                'run `npm ci` in web/ (make setup does)');
  process.exit(1);
}
fs.mkdirSync(out, { recursive: true });
const versions = {};
for (const [src, dst] of FILES) {
  fs.copyFileSync(path.join(modules, src), path.join(out, dst));
  const pkg = src.split('/')[0];
  versions[pkg] = JSON.parse(fs.readFileSync(path.join(modules, pkg, 'package.json'), 'utf8')).version;
}
fs.writeFileSync(path.join(out, 'versions.json'), JSON.stringify(versions, null, 2) + '\n');
console.log(`vendor: ${FILES.length} files into web/vendor/ (${Object.entries(versions).map(([k, v]) => `${k} ${v}`).join(', ')})`);
