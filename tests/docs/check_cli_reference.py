#!/usr/bin/env python3
"""docs/cli.md against the CLI's own --help.

Runs `embshard --help`, then `--help` of every command and subcommand it
lists (recursively: `bench compute`, ...), and fails naming
  - a command with no section of its own in docs/cli.md (a heading
    `## plan`, `## bench compute`),
  - an option of a command that its section does not mention,
  - a section for a command that no longer exists,
  - a setting of an `--expert` option (`KEY=DEFAULT` in its help) that
    docs/cli.md does not document as `KEY=` or `KEY` in backquotes.
Usage: check_cli_reference.py --cli build/embshard --doc docs/cli.md
"""
import argparse
import re
import subprocess
import sys


def help_text(cli, words):
    run = subprocess.run([cli, *words, "--help"], capture_output=True, text=True, timeout=60)
    if run.returncode != 0:
        sys.exit(f"`{' '.join(['embshard', *words, '--help'])}` exited {run.returncode}: "
                 f"{run.stderr.strip()}")
    return run.stdout


def block(text, title):
    """The lines under `title:` (CLI11's "Options:", "Subcommands:") up to the next blank line."""
    lines, inside = [], False
    for line in text.splitlines():
        if line.strip() == title + ":":
            inside = True
        elif inside and not line.strip():
            break
        elif inside:
            lines.append(line)
    return lines


def options(text):
    """Every option a help text lists, long name where it has one: ['-o,--out' -> '--out']."""
    found = []
    for line in block(text, "Options"):
        m = re.match(r"^  (-[\w-]+(?:,--?[\w-]+)*)", line)
        if not m:
            continue  # a wrapped description line
        names = m.group(1).split(",")
        longs = [n for n in names if n.startswith("--")]
        name = longs[0] if longs else names[0]
        if name not in ("--help", "--version"):
            found.append(name)
    return found


def expert_keys(text):
    """The KEYs of the --expert option's help: '... settings"): beam-width=3, max-steps=10'."""
    for line in block(text, "Options"):
        if re.match(r"^  --expert\b", line):
            return re.findall(r"([a-z][a-z0-9-]*)=[^,\s]+", line.split("):", 1)[-1])
    return []


def subcommands(text):
    return [m.group(1) for line in block(text, "Subcommands")
            if (m := re.match(r"^  ([a-z][\w-]*)\s", line))]


def commands(cli, words=()):
    """{'plan': [options], 'bench compute': [...], ...}, walking the subcommands."""
    text = help_text(cli, list(words))
    subs = subcommands(text)
    found = {}
    if words and not subs:
        found[" ".join(words)] = options(text) + [f"expert:{k}" for k in expert_keys(text)]
    for sub in subs:
        found.update(commands(cli, (*words, sub)))
    return found


def sections(doc):
    """{'plan': text of its section, ...}: `## plan` or `## embshard plan` headings."""
    out, name = {}, None
    for line in open(doc, encoding="utf-8").read().splitlines():
        m = re.match(r"^## `?(?:embshard )?([a-z][a-z -]*?)`?\s*$", line)
        if m:
            name = m.group(1)
            out[name] = ""
        elif line.startswith("## "):
            name = None  # a section of no command (Conventions)
        elif name is not None:
            out[name] += line + "\n"
    return out


def mentions(text, option):
    # `--verify` must not count as mentioned by `--verify-rounds` alone.
    return re.search(re.escape(option) + r"(?![\w-])", text) is not None


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cli", required=True, help="the embshard binary")
    parser.add_argument("--doc", required=True, help="docs/cli.md")
    args = parser.parse_args()
    found = commands(args.cli)
    documented = sections(args.doc)
    doc_text = open(args.doc, encoding="utf-8").read()
    faults = []
    for command, opts in sorted(found.items()):
        if command not in documented:
            faults.append(f"command '{command}' has no section '## {command}' in {args.doc}")
            continue
        for opt in opts:
            if opt.startswith("expert:"):
                key = opt.split(":", 1)[1]
                if not re.search(rf"`{re.escape(key)}(=|`)", doc_text):
                    faults.append(f"'{command}': --expert setting {key} is not documented in "
                                  f"{args.doc}")
                continue
            if not mentions(documented[command], opt):
                faults.append(f"'{command}': option {opt} is not in its section of {args.doc}")
    for command in sorted(set(documented) - set(found)):
        faults.append(f"{args.doc} documents '{command}', which `embshard --help` does not list")
    total = sum(len(o) for o in found.values())
    if faults:
        print("\n".join(faults))
        print(f"{len(faults)} fault(s) in {args.doc} against {len(found)} commands' --help")
        return 1
    print(f"{args.doc}: {len(found)} commands and {total} options, every one documented")
    return 0


if __name__ == "__main__":
    sys.exit(main())
