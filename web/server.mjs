// server.mjs: the playground's static file server. It sends the headers that WebAssembly threads
// need (cross-origin isolation: COOP same-origin + COEP require-corp), the right MIME types
// (application/wasm for the module), and serves only two trees: web/ (the page, without its
// node_modules) and the built WebAssembly module (wasm/dist/ and the package's wrapper
// wasm/index.cjs, under the URL prefix /wasm/); and one more file, the chapter's experiments
// (experiments/chapter.cjs, which the Worker runs, at /experiments/chapter.cjs). Anything else is
// refused: `..` (plain or percent-encoded), backslashes, NUL bytes, and symlinks whose target
// leaves those trees.
//   node web/server.mjs [--port N] [--host H]      (PORT / HOST from the environment too)
// N is a decimal integer from 0 to 65535, 0 meaning a free port the system picks (the address is
// printed); anything else is refused, naming what was typed. Default 127.0.0.1:8080.
// Importable: startServer({ port, host, log }) resolves with the http.Server (port 0 = any free
// port); parseCommandLine and serverUrl are the command line's parts, for the tests.
import http from 'node:http';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const repo = path.resolve(here, '..');
export const WEB_ROOT = here;
export const WASM_ROOT = path.join(repo, 'wasm');
export const EXPERIMENTS_ROOT = path.join(repo, 'experiments');

const MIME = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.cjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json; charset=utf-8',
  '.wasm': 'application/wasm',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.txt': 'text/plain; charset=utf-8',
  '.map': 'application/json; charset=utf-8',
};

// Headers on every answer, errors included: isolation for SharedArrayBuffer (threads), and
// resources that only this origin may embed.
const COMMON_HEADERS = {
  'Cross-Origin-Opener-Policy': 'same-origin',
  'Cross-Origin-Embedder-Policy': 'require-corp',
  'Cross-Origin-Resource-Policy': 'same-origin',
  'X-Content-Type-Options': 'nosniff',
  'Cache-Control': 'no-cache',
};

// Maps a URL path to { root, rel }: the tree it must stay inside and the path relative to it,
// or null when the URL names nothing we serve.
function route(urlPath) {
  if (urlPath === '/wasm/index.cjs') return { root: WASM_ROOT, rel: 'index.cjs' };
  if (urlPath === '/experiments/chapter.cjs') return { root: EXPERIMENTS_ROOT, rel: 'chapter.cjs' };
  if (urlPath.startsWith('/wasm/dist/')) {
    return { root: path.join(WASM_ROOT, 'dist'), rel: urlPath.slice('/wasm/dist/'.length) };
  }
  if (urlPath.startsWith('/wasm/') || urlPath.startsWith('/experiments/') ||
      urlPath.startsWith('/node_modules/') || urlPath.startsWith('/test/')) {
    return null;
  }
  const rel = urlPath === '/' ? 'index.html' : urlPath.slice(1);
  return { root: WEB_ROOT, rel };
}

// Resolves a request target to a real file inside its tree, or returns an HTTP status.
export function resolveRequest(rawUrl) {
  const q = rawUrl.search(/[?#]/);
  const raw = q < 0 ? rawUrl : rawUrl.slice(0, q);
  let urlPath;
  try {
    urlPath = decodeURIComponent(raw);
  } catch {
    return { status: 400, reason: 'bad percent-encoding' };
  }
  if (!urlPath.startsWith('/') || urlPath.includes('\0') || urlPath.includes('\\')) {
    return { status: 400, reason: 'bad path' };
  }
  // Refuse any `..` or `.` segment outright instead of normalising it away.
  if (urlPath.split('/').some((s) => s === '..' || s === '.')) {
    return { status: 403, reason: 'path traversal' };
  }
  const r = route(urlPath);
  if (!r) return { status: 404, reason: 'not served' };
  let rootReal, fileReal;
  try {
    // The native realpath gives each name's case as it is on disk (the JavaScript one keeps the
    // request's case on a case-insensitive file system).
    rootReal = fs.realpathSync.native(r.root);
    fileReal = fs.realpathSync.native(path.join(r.root, r.rel));
  } catch {
    return { status: 404, reason: 'no such file' };
  }
  // A symlink may point anywhere: what counts is where the file really is.
  if (fileReal !== rootReal && !fileReal.startsWith(rootReal + path.sep)) {
    return { status: 403, reason: 'outside the served tree' };
  }
  if (r.root === WEB_ROOT) {
    // Compared without case: on a case-insensitive file system (macOS, Windows) /Node_Modules/
    // and /TEST/ name the same folders.
    const top = path.relative(rootReal, fileReal).split(path.sep)[0].toLowerCase();
    if (top === 'node_modules' || top === 'test') return { status: 404, reason: 'not served' };
  }
  let st;
  try {
    st = fs.statSync(fileReal);
  } catch {
    return { status: 404, reason: 'no such file' };
  }
  if (!st.isFile()) return { status: 404, reason: 'not a file' };
  return { status: 200, file: fileReal, size: st.size };
}

function handle(req, res) {
  if (req.method !== 'GET' && req.method !== 'HEAD') {
    res.writeHead(405, { ...COMMON_HEADERS, Allow: 'GET, HEAD', 'Content-Type': 'text/plain' });
    res.end('method not allowed\n');
    return;
  }
  const r = resolveRequest(req.url);
  if (r.status !== 200) {
    res.writeHead(r.status, { ...COMMON_HEADERS, 'Content-Type': 'text/plain; charset=utf-8' });
    res.end(`${r.status}: ${r.reason}\n`);
    return;
  }
  const type = MIME[path.extname(r.file).toLowerCase()] || 'application/octet-stream';
  res.writeHead(200, { ...COMMON_HEADERS, 'Content-Type': type, 'Content-Length': r.size });
  if (req.method === 'HEAD') {
    res.end();
    return;
  }
  const stream = fs.createReadStream(r.file);
  stream.on('error', () => res.destroy());
  stream.pipe(res);
}

// log: where errors after listening go (an accept error such as EMFILE): the server reports
// them and keeps serving; an 'error' event without a listener would end the process.
export function startServer({ port = 8080, host = '127.0.0.1', log = console.error } = {}) {
  const server = http.createServer(handle);
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      server.on('error', (e) => log(`server: ${e.message}`));
      resolve(server);
    });
  });
}

// The command line's options, then PORT and HOST from `env`: { port, host }, or an Error that
// names what was given. Only a decimal integer is a port (Number() would read '', ' ', '0x50'
// and '1e3' as ports); an empty host would listen on every interface.
export function parseCommandLine(args, env = {}) {
  const given = {};
  for (let i = 0; i < args.length; ++i) {
    const a = args[i];
    if (a !== '--port' && a !== '--host') {
      throw new Error(`unknown argument '${a}' (node web/server.mjs [--port N] [--host H])`);
    }
    if (i + 1 >= args.length) throw new Error(`${a} needs a value`);
    given[a] = args[++i];
  }
  const [portText, portFrom] = given['--port'] !== undefined ? [given['--port'], '--port']
    : env.PORT !== undefined ? [env.PORT, 'PORT'] : ['8080', 'the default'];
  if (!/^[0-9]+$/.test(portText) || Number(portText) > 65535) {
    throw new Error(`bad port '${portText}' (${portFrom}): a decimal integer from 0 to 65535, 0 for any free port`);
  }
  const [host, hostFrom] = given['--host'] !== undefined ? [given['--host'], '--host']
    : env.HOST !== undefined ? [env.HOST, 'HOST'] : ['127.0.0.1', 'the default'];
  if (host.trim() === '') throw new Error(`bad host '${host}' (${hostFrom}): empty`);
  return { port: Number(portText), host };
}

// The address to open: an IPv6 host goes in brackets (http://[::1]:8080/).
export function serverUrl({ address, port }) {
  return `http://${address.includes(':') ? `[${address}]` : address}:${port}/`;
}

if (import.meta.url === pathToFileURL(process.argv[1] || '').href) {
  let port, host;
  try {
    ({ port, host } = parseCommandLine(process.argv.slice(2), process.env));
  } catch (e) {
    console.error(`server: ${e.message}`);
    process.exit(2);
  }
  if (!fs.existsSync(path.join(WASM_ROOT, 'dist', 'asyncnd.wasm'))) {
    console.error('server: wasm/dist/asyncnd.wasm is missing: run `make wasm` (or `make playground`) first');
    process.exit(2);
  }
  if (!fs.existsSync(path.join(WEB_ROOT, 'vendor'))) {
    console.error('server: web/vendor/ is missing: run `node web/vendor.mjs` (or `make playground`) first');
    process.exit(2);
  }
  startServer({ port, host }).then((s) => {
    const a = s.address();
    console.log(`asyncnd playground: ${serverUrl(a)}  (Ctrl-C stops it)`);
  }, (e) => {
    console.error(`server: cannot listen on ${host.includes(':') ? `[${host}]` : host}:${port}: ${e.message}`);
    process.exit(1);
  });
}
