#!/usr/bin/env python3
"""Lines of every Rust function in the given files (signature to closing brace), longest first.

Usage: scripts/fn-lengths.py [--over N] FILE...   (prints `lines file:line name`)
A small brace matcher that skips strings, chars and comments; good enough for this code base.
"""
import re
import sys

FN = re.compile(r'^\s*(?:pub(?:\([^)]*\))?\s+)?(?:const\s+|async\s+|unsafe\s+|extern\s+"C"\s+)*fn\s+(\w+)')


def strip(src):
    """`src` with string, char and comment contents blanked (newlines kept)."""
    out, i, n = [], 0, len(src)
    while i < n:
        c = src[i]
        if src.startswith('//', i):
            j = src.find('\n', i)
            j = n if j < 0 else j
            out.append(' ' * (j - i)); i = j
        elif src.startswith('/*', i):
            j = src.find('*/', i + 2); j = n if j < 0 else j + 2
            out.append(re.sub(r'[^\n]', ' ', src[i:j])); i = j
        elif c == 'r' and re.match(r'r#*"', src[i:i + 10]) and not (i and (src[i-1].isalnum() or src[i-1] == '_')):
            m = re.match(r'r(#*)"', src[i:]); close = '"' + m.group(1)
            j = src.find(close, i + len(m.group(0))); j = n if j < 0 else j + len(close)
            out.append(re.sub(r'[^\n]', ' ', src[i:j])); i = j
        elif c == '"':
            j = i + 1
            while j < n and src[j] != '"':
                j += 2 if src[j] == '\\' else 1
            j += 1
            out.append(re.sub(r'[^\n]', ' ', src[i:j])); i = j
        elif c == "'":
            m = re.match(r"'(\\.[^']*|[^\\'])'", src[i:])
            if m:
                out.append(' ' * len(m.group(0))); i += len(m.group(0))
            else:
                out.append(c); i += 1
        else:
            out.append(c); i += 1
    return ''.join(out)


def lengths(path):
    lines = strip(open(path).read()).split('\n')
    res = []
    for k, line in enumerate(lines):
        m = FN.match(line)
        if not m:
            continue
        depth, opened = 0, False
        for e in range(k, len(lines)):
            for ch in lines[e]:
                if ch == '{':
                    depth += 1; opened = True
                elif ch == '}':
                    depth -= 1
                elif ch == ';' and not opened and depth == 0:
                    break
            else:
                if opened and depth == 0:
                    res.append((e - k + 1, f'{path}:{k + 1}', m.group(1)))
                    break
                continue
            break
    return res


def main():
    args = sys.argv[1:]
    over = 0
    if args[:1] == ['--over']:
        over = int(args[1]); args = args[2:]
    rows = sorted((r for p in args for r in lengths(p)), reverse=True)
    for n, at, name in rows:
        if n > over:
            print(f'{n:5} {at} {name}')


if __name__ == '__main__':
    main()
