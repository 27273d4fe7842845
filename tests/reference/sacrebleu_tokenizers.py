#!/usr/bin/python3
"""Independent reference for headcount's BLEU tokenizers, written from mteval's published rules
with Python's own `re` and the `regex` module (the engines sacreBLEU runs them on), so that
non-overlapping matches, Unicode categories and str.split() whitespace come from Python itself.

Usage: sacrebleu_tokenizers.py TOKENIZER < lines > tokenized lines
"""
import re
import sys

import regex


def mteval_13a(line):
    line = line.replace('<skipped>', '').replace('-\n', '').replace('\n', ' ')
    if '&' in line:
        line = line.replace('&quot;', '"').replace('&amp;', '&')
        line = line.replace('&lt;', '<').replace('&gt;', '>')
    line = f' {line} '
    for pattern, repl in ((r'([\{-\~\[-\` -\&\(-\+\:-\@\/])', r' \1 '),
                          (r'([^0-9])([\.,])', r'\1 \2 '),
                          (r'([\.,])([^0-9])', r' \1 \2'),
                          (r'([0-9])(-)', r'\1 \2 ')):
        line = re.sub(pattern, repl, line)
    return ' '.join(line.split())


def mteval_14_international(line):
    for pattern, repl in ((r'(\P{N})(\p{P})', r'\1 \2 '),
                          (r'(\p{P})(\P{N})', r' \1 \2'),
                          (r'(\p{S})', r' \1 ')):
        line = regex.sub(pattern, repl, line)
    return ' '.join(line.split())


def characters(line):
    return ' '.join(line)


TOKENIZERS = {'13a': mteval_13a, 'intl': mteval_14_international, 'char': characters,
              'none': lambda line: line}

if __name__ == '__main__':
    tok = TOKENIZERS[sys.argv[1]]
    data = sys.stdin.buffer.read().decode('utf-8')
    # Lines are separated by '\n' only (str.splitlines would also split on other characters).
    lines = data.split('\n')
    if lines and lines[-1] == '':
        lines.pop()
    out = [tok(l) for l in lines]
    sys.stdout.buffer.write(('\n'.join(out) + '\n').encode('utf-8'))
