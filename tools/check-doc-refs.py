#!/usr/bin/env python3
"""Checks that every reference to a section of the benchmark notes names a section that exists,
and that every path into the repository that a comment or document names exists.

Comments and documents point to measurements as `bench/notes/gemm.md, "Our own AVX2 GEMM"` (or
`bench/README.md, "The figures"`), and the notes link to each other as `["Title"](per-op.md)`.
A heading renamed or moved to another file leaves such a pointer dangling, and nothing else would
notice. A title matches a heading (## or ###) that it begins: the headings carry a date the
references leave out, as in "Splitting long runs (2026-11-27, 07:08-07:30 UTC)".

Paths are checked too: `native/cpu/gemm_select.h`, `bench/notes/limits.md` or `wasm/test/` named
anywhere must exist, from the repository's root or from the naming file's folder, so that a file
renamed or removed is caught where it is named. What the build makes (`wasm/dist/`, `web/vendor/`,
node_modules), which git ignores, need not exist. A file mentioned as history ("the since removed
...") is named without its folder, so that it is not taken for a pointer.

Usage: tools/check-doc-refs.py [SOURCE_DIR]   (default: the repository this script is in)
Prints each dangling reference with its file and line; exits 1 if there is any.
"""
import os
import re
import subprocess
import sys

ROOT = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                       os.path.join(os.path.dirname(__file__), '..'))
SKIP_DIRS = {'.git', 'node_modules', 'build', '.gpu-deps'}
SKIP_PATHS = {os.path.join('wasm', 'dist'), os.path.join('web', 'vendor')}  # build outputs
SUFFIXES = ('.cpp', '.h', '.c', '.cu', '.cuh', '.js', '.cjs', '.mjs', '.ts', '.py', '.sh', '.md',
            '.txt', '.cmake', '.html', '.json')


def norm(s):
    return re.sub(r'\s+', ' ', s).strip()


def headings(path):
    with open(path, encoding='utf-8') as f:
        return [norm(m.group(1)) for m in re.finditer(r'^#{2,3} (.+)$', f.read(), re.M)]


def matches(title, heads):
    title = norm(title)
    return any(h == title or (h.startswith(title) and h[len(title)] in ' :(') for h in heads)


def source_files():
    for d, dirs, files in os.walk(ROOT):
        dirs[:] = [x for x in dirs if x not in SKIP_DIRS and not x.startswith('build-') and
                   os.path.relpath(os.path.join(d, x), ROOT) not in SKIP_PATHS]
        for name in files:
            if name.endswith(SUFFIXES) or name == 'Makefile':
                yield os.path.join(d, name)


# A path, then within a few characters (a backtick, a comma, line breaks with their comment
# markers) one quoted title, then more joined by commas or "and".
COMMENT_BREAK = r'(?:\s*\n\s*(?://+|#|\*)?)?'
QUOTED = r'"([^"\n]+(?:' + COMMENT_BREAK + r'[^"\n]+)*)"'
REF = re.compile(r'bench/(README|notes/[\w-]+)\.md`?,?\s*' + COMMENT_BREAK + r'\s*' + QUOTED +
                 r'((?:\s*(?:,|and)\s*' + COMMENT_BREAK + r'\s*' + QUOTED + r')*)')
LINK = re.compile(r'\[("[^"]+")\]\(((?:notes/)?[\w-]+\.md|\.\./README\.md)\)')


# A path into the repository: one of its top folders, then at least one more part; not the tail of
# a longer path or a URL (github.com/.../tests/x), and not a glob. `shared` is not the project's:
# some checkouts (the device machine's copy) carry the team's notes there.
TOP_DIRS = sorted(d for d in os.listdir(ROOT) if os.path.isdir(os.path.join(ROOT, d)) and
                  d not in SKIP_DIRS and not d.startswith('build-') and d != 'shared')
PATH = re.compile(r'(?<![\w./*-])((?:' + '|'.join(re.escape(d) for d in TOP_DIRS) +
                  r')/[\w.-]+(?:/[\w.-]+)*/?)(?![\w*])')


def git_ignored(rel):
    """Whether git ignores this path (a build output); False where git cannot say. A folder that
    does not exist matches a pattern for folders (`wasm/dist/`) only with its trailing slash."""
    try:
        return any(subprocess.run(['git', '-C', ROOT, 'check-ignore', '-q', '--no-index', r],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                   .returncode == 0 for r in (rel, rel.rstrip('/') + '/'))
    except OSError:
        return False


def line_of(text, pos):
    return text.count('\n', 0, pos) + 1


def clean(title):
    return norm(re.sub(r'\n\s*(?://+|#|\*)?', ' ', title))


def main():
    cache = {}

    def heads_of(path):
        if path not in cache:
            cache[path] = headings(path) if os.path.exists(path) else None
        return cache[path]

    bad = []
    checked = 0
    paths = 0
    ignored = {}
    for path in source_files():
        try:
            with open(path, encoding='utf-8') as f:
                text = f.read()
        except (UnicodeDecodeError, OSError):
            continue
        rel = os.path.relpath(path, ROOT)
        for m in REF.finditer(text):
            target = os.path.join(ROOT, 'bench', m.group(1) + '.md')
            titles = [m.group(2)] + re.findall(QUOTED, m.group(3) or '')
            heads = heads_of(target)
            for t in titles:
                checked += 1
                if heads is None:
                    bad.append(f'{rel}:{line_of(text, m.start())}: bench/{m.group(1)}.md '
                               'does not exist')
                elif not matches(clean(t), heads):
                    bad.append(f'{rel}:{line_of(text, m.start())}: no section "{clean(t)}" '
                               f'in bench/{m.group(1)}.md')
        if rel.startswith('bench' + os.sep) and rel.endswith('.md'):
            for m in LINK.finditer(text):
                target = os.path.normpath(os.path.join(os.path.dirname(path), m.group(2)))
                heads = heads_of(target)
                checked += 1
                title = clean(m.group(1).strip('"'))
                if heads is None:
                    bad.append(f'{rel}:{line_of(text, m.start())}: {m.group(2)} does not exist')
                elif not matches(title, heads):
                    bad.append(f'{rel}:{line_of(text, m.start())}: no section "{title}" in '
                               f'{os.path.relpath(target, ROOT)}')
        for m in PATH.finditer(text):
            p = m.group(1).rstrip('.')
            paths += 1
            if os.path.exists(os.path.join(ROOT, p)) or \
                    os.path.exists(os.path.join(os.path.dirname(path), p)):
                continue
            if p not in ignored:
                ignored[p] = git_ignored(p)
            if not ignored[p]:
                bad.append(f'{rel}:{line_of(text, m.start())}: {p} does not exist')
    for b in bad:
        print(b)
    print(f'check-doc-refs: {checked} section references and {paths} paths, {len(bad)} dangling')
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
