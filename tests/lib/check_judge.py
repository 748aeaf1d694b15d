#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Judge the checking mode's reports (ibemu(1) CHECKS) against a list.

Usage: check_judge.py EXPECT LOG...

Each report of the logs (IBEMU_CHECK_LOG files) is read with its stacks;
the frames of programs (not shared libraries) are named with addr2line,
inlined functions included, since a test's functions are mostly static
and the stack printer sees exported symbols only.  EXPECT holds lines

    KIND  WHERE-REGEX  REASON

(# comments and blank lines aside): a report of KIND is explained when
WHERE-REGEX is found in "FUNCTIONS | MESSAGE", FUNCTIONS being the names
of its stacks' frames, innermost first, separated by spaces.  Explained
reports are counted per entry; any other report is printed in full and
makes the exit status 1, as does an entry whose KIND is written +KIND
(a misuse the program always commits) that explained no report.  Logs without a summary line are counted (a
process that ended by _exit or a signal has none) and listed.
"""
import os
import re
import subprocess
import sys

HEAD = re.compile(r'^==(\d+)== ibemu check: ([a-z-]+): (.*)$')
CONT = re.compile(r'^==\d+==   ')
FRAME = re.compile(r'^==\d+==     #\d+ 0x[0-9a-f]+ '
                   r'(?:in (\S+)\+0x[0-9a-f]+ \((.*)\)|\((.*)\+(0x[0-9a-f]+)\))$')
SUMMARY = re.compile(r'^==\d+== ibemu check: (no misuse found|summary:)')


class Names:
    """addr2line over the program objects, one call per object."""

    def __init__(self):
        self.cache = {}

    def load(self, reports):
        want = {}
        for r in reports:
            for f in r['frames']:
                if isinstance(f, tuple) and self.is_program(f[0]):
                    want.setdefault(f[0], set()).add(f[1])
        for obj, offs in want.items():
            offs = sorted(offs)
            # A return address is one past its call.
            args = ['addr2line', '-f', '-i', '-a', '-e', obj] + \
                [hex(o - 1) for o in offs]
            try:
                out = subprocess.run(args, capture_output=True, text=True,
                                     timeout=60).stdout.split('\n')
            except (OSError, subprocess.SubprocessError):
                continue
            cur = None
            i = 0
            while i < len(out):
                line = out[i]
                if line.startswith('0x'):
                    cur = int(line, 16) + 1
                    self.cache[(obj, cur)] = []
                    i += 1
                    continue
                if cur is not None and line and line != '??':
                    self.cache[(obj, cur)].append(line)
                i += 2  # the function, then its file:line
        return self

    @staticmethod
    def is_program(obj):
        base = os.path.basename(obj)
        return os.path.isfile(obj) and '.so' not in base

    def names(self, frame):
        if isinstance(frame, str):
            return [frame]
        return self.cache.get(frame, [])


def read_logs(paths):
    reports, no_summary = [], []
    for p in paths:
        cur, summary = None, False
        with open(p, errors='replace') as f:
            for line in f:
                line = line.rstrip('\n')
                if SUMMARY.match(line):
                    summary, cur = True, None
                    continue
                m = HEAD.match(line)
                if m:
                    cur = {'kind': m.group(2), 'msg': m.group(3),
                           'frames': [], 'text': [line], 'log': p}
                    reports.append(cur)
                    continue
                if cur is None or not CONT.match(line):
                    cur = None
                    continue
                cur['text'].append(line)
                m = FRAME.match(line)
                if m and m.group(1):
                    cur['frames'].append(m.group(1))
                elif m:
                    cur['frames'].append((m.group(3), int(m.group(4), 16)))
        if not summary:
            no_summary.append(p)
    return reports, no_summary


def read_expect(path):
    entries = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith('#'):
                continue
            parts = line.split(None, 2)
            if len(parts) < 3:
                sys.exit('%s:%d: want KIND WHERE-REGEX REASON' % (path, n))
            must = parts[0].startswith('+')
            entries.append({'kind': parts[0].lstrip('+'), 'must': must,
                            're': re.compile(parts[1]), 'why': parts[2],
                            'count': 0})
    return entries


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    entries = read_expect(sys.argv[1])
    reports, no_summary = read_logs(sys.argv[2:])
    names = Names().load(reports)
    unexplained = 0
    for r in reports:
        funcs = ' '.join(n for f in r['frames'] for n in names.names(f))
        where = '%s | %s' % (funcs, r['msg'])
        for e in entries:
            if e['kind'] == r['kind'] and e['re'].search(where):
                e['count'] += 1
                break
        else:
            unexplained += 1
            print('unexplained report (%s):' % r['log'])
            for t in r['text']:
                print('    ' + t)
            print('    functions: ' + funcs)
    missing = 0
    for e in entries:
        print('%4d %s %s: %s' % (e['count'], e['kind'], e['re'].pattern,
                                 e['why']))
        if e['must'] and not e['count']:
            missing += 1
            print('     ^ always committed, not reported')
    print('reports: %d, unexplained: %d, logs: %d, without a summary: %d'
          % (len(reports), unexplained, len(sys.argv) - 2, len(no_summary)))
    return 1 if unexplained or missing else 0


if __name__ == '__main__':
    sys.exit(main())
