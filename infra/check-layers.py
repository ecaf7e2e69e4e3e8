#!/usr/bin/env python3
"""Fails when a module cycle appears inside a crate, or the webhook reaches past its layer.

Cargo refuses cycles between crates; inside a crate nothing does. This reads each crate's
non-test source, draws an edge from a top-level module to every other top-level module it
names (`crate::x`, `use crate::{x, y}`, `super::x` from the top level), and reports every
strongly connected component of more than one module. Then it asks `cargo tree` for the
webhook function's dependency closure, which must hold no HTTP client, GraphQL, Markdown, S3,
SQS or LLM crate (invariant 1: the webhook calls nothing but DynamoDB), and for the token
function's, which holds the GitHub App's key and so must link no Notion, LLM, Markdown,
publishing or stage crate (the less code beside the key, the less to compromise). Run by
`.ci/run`.
"""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def lex(src):
    """Source with comments removed and string and char literals emptied: a small lexer, because
    a regex cannot tell `//` in a string, `/*` in a doc comment or `r#"…"#` apart."""
    out, i, n = [], 0, len(src)
    while i < n:
        c = src[i]
        if src.startswith("//", i):
            j = src.find("\n", i)
            i = n if j < 0 else j
        elif src.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if src.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif src.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    i += 1
        elif (m := re.match(r'b?r(#*)"', src[i:i + 260])) and (i == 0 or not (src[i - 1].isalnum() or src[i - 1] == "_")):
            end = '"' + m.group(1)
            j = src.find(end, i + m.end())
            out.append('""')
            i = n if j < 0 else j + len(end)
        elif c == '"':
            j = i + 1
            while j < n and src[j] != '"':
                j += 2 if src[j] == "\\" else 1
            out.append('""')
            i = j + 1
        elif c == "'" and (m := re.match(r"'(\\.[^']*|[^\\'])'", src[i:i + 12])):
            out.append("' '")
            i += m.end()
        else:
            out.append(c)
            i += 1
    return "".join(out)


def strip(src):
    """Source without comments, literals and `#[cfg(test)]` items (a test module or function)."""
    src = lex(src)
    out, i = [], 0
    for m in re.finditer(r"#\[cfg\(test\)\]", src):
        if m.start() < i:
            continue
        out.append(src[i:m.start()])
        # The item the attribute is on: up to its closing brace, or its `;`.
        j = m.end()
        while j < len(src) and src[j] not in "{;":
            j += 1
        if j < len(src) and src[j] == "{":
            depth, j = 1, j + 1
            while j < len(src) and depth:
                depth += {"{": 1, "}": -1}.get(src[j], 0)
                j += 1
        else:
            j += 1
        i = j
    out.append(src[i:])
    return "".join(out)


def braced_heads(text, start):
    """First identifiers of the comma-separated items inside the braces opening at `start`."""
    depth, j, item, heads = 1, start + 1, "", []
    while j < len(text) and depth:
        c = text[j]
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
        if depth == 1 and c == ",":
            heads.append(item)
            item = ""
        elif depth >= 1:
            item += c
        j += 1
    heads.append(item)
    return [m.group(0) for h in heads if (m := IDENT.match(h.strip()))]


def references(src, depth):
    refs = set()
    prefixes = ["crate::"] + (["super::" * depth] if depth else [])
    for prefix in prefixes:
        for m in re.finditer(r"\b" + re.escape(prefix), src):
            rest = src[m.end():]
            if rest.startswith("{"):
                refs.update(braced_heads(src, m.end()))
            elif (ident := IDENT.match(rest)) and not rest[ident.end():].startswith("super"):
                refs.add(ident.group(0))
    return refs


def module_graph(src_dir):
    graph = {}
    for dirpath, _, files in os.walk(src_dir):
        for name in files:
            if not name.endswith(".rs"):
                continue
            path = os.path.join(dirpath, name)
            parts = os.path.relpath(path, src_dir).split(os.sep)
            if parts[0] in ("lib.rs", "main.rs") or parts[0] == "bin":
                continue
            top = parts[0][:-3] if len(parts) == 1 else parts[0]
            # How many `super::` reach the crate root: 1 from src/x.rs or src/x/mod.rs, 2 from
            # src/x/y.rs or src/x/y/mod.rs.
            depth = len(parts) - 1 if parts[-1] == "mod.rs" else len(parts)
            refs = references(strip(open(path, encoding="utf-8").read()), depth)
            graph.setdefault(top, set()).update(r for r in refs if r != top)
    modules = set(graph)
    return {m: {r for r in refs if r in modules} for m, refs in graph.items()}


def cycles(graph):
    """Tarjan's strongly connected components of more than one node."""
    index, low, stack, on, found, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(10_000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def crates():
    for base in ("crates", "functions"):
        for name in sorted(os.listdir(os.path.join(ROOT, base))):
            yield os.path.join(base, name, "src")


# Crates the webhook's closure must not hold, and what each would mean.
WEBHOOK_FORBIDDEN = {
    "reqwest": "an HTTP client",
    "graphql_client": "GraphQL",
    "pulldown-cmark": "Markdown",
    "pulldown-cmark-to-cmark": "Markdown",
    "aws-sdk-s3": "S3",
    "aws-sdk-sqs": "SQS",
    "aws-sdk-bedrockruntime": "an LLM",
    "jsonwebtoken": "GitHub App tokens",
    "globset": "tagging",
    "aws-sdk-dynamodbstreams": "the stream reader",
    "chronicle-http": "the clients' HTTP layer",
    "chronicle-github": "the GitHub client",
    "chronicle-notion": "the Notion client",
    "chronicle-summary": "summaries",
    "chronicle-llm": "an LLM",
    "chronicle-tagging": "tagging",
    "chronicle-pages": "pages",
    "chronicle-publish": "the publishers",
    "chronicle-stages": "the other stages",
}


# Crates the token function's closure must not hold: it holds the App's key.
TOKEN_FORBIDDEN = {
    "pulldown-cmark": "Markdown",
    "pulldown-cmark-to-cmark": "Markdown",
    "aws-sdk-bedrockruntime": "an LLM",
    "aws-sdk-sqs": "SQS",
    "globset": "tagging",
    "chronicle-notion": "the Notion client",
    "chronicle-summary": "summaries",
    "chronicle-llm": "an LLM",
    "chronicle-tagging": "tagging",
    "chronicle-pages": "pages",
    "chronicle-publish": "the publishers",
    "chronicle-ingest": "the webhook's parsing",
    "chronicle-stages": "the other stages",
}


def closure_of(package):
    """The crate names in `package`'s normal dependencies, on every target."""
    command = ["cargo", "tree", "-p", package, "-e", "normal", "--target", "all",
               "--prefix", "none", "--locked"]
    out = subprocess.run(command + ["--offline"], cwd=ROOT, capture_output=True, text=True)
    if out.returncode != 0:
        out = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    if out.returncode != 0:
        print(f"check-layers: {' '.join(command)} failed:\n{out.stderr}", file=sys.stderr)
        sys.exit(2)
    return {line.split()[0] for line in out.stdout.splitlines() if line.strip()}


def main():
    failed = False
    closure = closure_of("chronicle-webhook")
    for name, what in sorted(WEBHOOK_FORBIDDEN.items()):
        if name in closure:
            failed = True
            print(f"check-layers: chronicle-webhook depends on {name} ({what}); see `cargo tree -p chronicle-webhook -i {name}`")
    token = closure_of("chronicle-token")
    for name, what in sorted(TOKEN_FORBIDDEN.items()):
        if name in token:
            failed = True
            print(f"check-layers: chronicle-token (the App's key) depends on {name} ({what}); see `cargo tree -p chronicle-token -i {name}`")
    for src in crates():
        graph = module_graph(os.path.join(ROOT, src))
        for component in cycles(graph):
            failed = True
            edges = [f"{a} -> {b}" for a in component for b in sorted(graph[a]) if b in component]
            print(f"check-layers: module cycle in {src}: {', '.join(component)}\n  " + "\n  ".join(edges))
    if failed:
        print("check-layers: see docs/ARCHITECTURE.md for the layers; move the shared piece down one")
        return 1
    print(f"check-layers: no module cycle in any crate; the webhook's {len(closure)} crates hold none of {len(WEBHOOK_FORBIDDEN)} forbidden; the token function's {len(token)} none of {len(TOKEN_FORBIDDEN)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
