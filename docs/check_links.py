#!/usr/bin/env python3
# Run from the repository root: python3 docs/check_links.py
"""Every relative Markdown link in README.md and docs/*.md resolves: the file exists and, when
the link names an anchor, a heading of that file has it (GitHub's slugs)."""
import glob, os, re, sys
def slug(h):
    h = re.sub(r'[^\w\- ]', '', h.strip().lower())
    return h.replace(' ', '-')
def anchors(path):
    out, block = set(), False
    for line in open(path):
        if line.startswith('```'): block = not block
        if not block and re.match(r'#{1,6} ', line):
            out.add(slug(re.sub(r'^#+ ', '', line.rstrip('\n'))))
    return out
bad = 0
for page in ['README.md'] + sorted(glob.glob('docs/*.md')):
    text = re.sub(r'```.*?```', '', open(page).read(), flags=re.S)
    for target in re.findall(r'\]\(([^)\s]+)\)', text):
        if re.match(r'[a-z]+://', target): continue
        path, _, anchor = target.partition('#')
        dest = os.path.normpath(os.path.join(os.path.dirname(page), path)) if path else page
        if not os.path.isfile(dest):
            print(f'{page}: {target}: no file {dest}'); bad += 1
        elif anchor and dest.endswith('.md') and anchor not in anchors(dest):
            print(f'{page}: {target}: no heading #{anchor} in {dest}'); bad += 1
print('links: %d broken' % bad); sys.exit(1 if bad else 0)
