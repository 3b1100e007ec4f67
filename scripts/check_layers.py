#!/usr/bin/env python3
"""Fails when a layer of the library includes a layer above it (docs/architecture.md).

    scripts/check_layers.py [REPO]        # CTest "layering" runs it
    scripts/check_layers.py --self-test   # shows that it catches an upward include

Every `#include "..."` in the library (src/, topology/, sharding/) and its consumers (bindings/,
trainer/, tools/) is spelled from an include root, so its first path component names the layer
it reaches into ("base/log.hpp", "strata/communicator.hpp"). The table below says which layers
each may reach; its own layer and the public headers (strata/) are always allowed. Spellings
that climb (`../`) or reach past the roots (`src/...`) are refused: they hide the layer.
"""

import pathlib
import re
import sys

# Library layers, bottom up: each may include those it lists (and itself, and strata/).
LIBRARY = {
    "base": [],
    "kernels": [],
    "store": ["base"],
    "bootstrap": ["base"],
    "transport": ["bootstrap", "base"],
    "topology": ["bootstrap", "base"],
    "shm": ["transport", "kernels", "bootstrap", "base"],
    "algorithms": ["transport", "kernels", "base"],
    "comm": ["algorithms", "shm", "transport", "kernels", "bootstrap", "base"],
    "sharding": [],
}
# Consumers use the public headers; the C ABI also reads the job's environment itself.
CONSUMERS = {
    "bindings/c": ["bootstrap", "base"],
    "bindings/python": [],
    "bindings/torch": [],
    "trainer": [],
    "tools": [],
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
SOURCES = ("*.hpp", "*.cpp", "*.h", "*.c")


def layer_of(rel):
    """The layer (a key of LIBRARY or CONSUMERS) of a path relative to the repository, or None."""
    parts = rel.parts
    if parts[0] == "src" and len(parts) > 2 and parts[1] in LIBRARY:
        return parts[1]
    if parts[0] in LIBRARY:
        return parts[0]
    for c in CONSUMERS:
        if rel.as_posix().startswith(c + "/"):
            return c
    return None


def check(repo):
    errors = []
    files = 0
    for top in ("src", "topology", "sharding", "bindings", "trainer", "tools"):
        for pattern in SOURCES:
            for path in sorted((repo / top).rglob(pattern)):
                rel = path.relative_to(repo)
                layer = layer_of(rel)
                if layer is None:
                    errors.append(f"{rel}: in no layer of scripts/check_layers.py's table")
                    continue
                files += 1
                allowed = set(LIBRARY.get(layer, CONSUMERS.get(layer, []))) | {"strata", layer}
                for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
                    m = INCLUDE.match(line)
                    if not m:
                        continue
                    spelled = m.group(1)
                    if spelled.startswith("../") or "/../" in spelled or spelled.startswith("src/"):
                        errors.append(f"{rel}:{n}: #include \"{spelled}\" hides its layer")
                        continue
                    if "/" not in spelled:
                        continue  # a file beside this one
                    target = spelled.split("/")[0]
                    if target not in allowed:
                        errors.append(f"{rel}:{n}: layer {layer} includes \"{spelled}\" "
                                      f"(layer {target}); it may include "
                                      f"{', '.join(sorted(allowed))}")
    return files, errors


def self_test():
    """A tree with one upward include (base -> comm) and one climbing spelling: both reported."""
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        root = pathlib.Path(d)
        for rel, text in {"src/base/a.cpp": '#include "comm/engine.hpp"\n',
                          "src/comm/b.cpp": '#include "base/log.hpp"\n#include "../x.hpp"\n',
                          "src/shm/c.cpp": '#include "kernels/blocks.hpp"\n'}.items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text(text)
        files, errors = check(root)
    expected = ['src/base/a.cpp:1: layer base includes "comm/engine.hpp"',
                'src/comm/b.cpp:2: #include "../x.hpp" hides its layer']
    ok = files == 3 and len(errors) == 2 and all(
        e.startswith(x) for e, x in zip(sorted(errors), expected))
    print("check_layers self-test:", "passed" if ok else f"FAILED: {files} files, {errors}")
    return 0 if ok else 1


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    repo = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else
                        pathlib.Path(__file__).resolve().parent.parent)
    files, errors = check(repo)
    for e in errors:
        print(e)
    if errors:
        print(f"check_layers: {len(errors)} include(s) against the layering "
              f"(docs/architecture.md)", file=sys.stderr)
        return 1
    print(f"check_layers: {files} files, every include goes down or sideways as allowed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
