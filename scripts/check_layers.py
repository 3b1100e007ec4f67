#!/usr/bin/env python3
"""Fails when a layer of the library includes a layer above it (docs/architecture.md).

    scripts/check_layers.py [REPO]        # CTest "layering" runs it
    scripts/check_layers.py --self-test   # shows that it catches an upward include

Every `#include "..."` in the library (src/) and its consumers (bindings/, trainer/, tools/) is
spelled from an include root, so its first path component names the layer it reaches into
("base/log.hpp", "strata/communicator.hpp"). src/layers.txt says which layers each library layer
may reach (the build enforces the same table: each layer compiles against links to those layers
only); CONSUMERS below says it for the rest, and OWN_LAYER_ONLY names the headers no other layer
may include (a transport's implementation: the runtime sees its interface). A file's own layer and the public headers (strata/)
are always allowed. Spellings that climb (`../`) or reach past the roots (`src/...`) are refused:
they hide the layer, and the compiler would find them beside the including file.
"""

import pathlib
import re
import sys


def read_layers(repo):
    """src/layers.txt: each library layer and the layers below it that it may include."""
    table = {}
    for line in (repo / "src" / "layers.txt").read_text().splitlines():
        if line and not line.startswith("#"):
            layer, *below = line.split()
            table[layer] = below
    return table


# Consumers use the public headers; the C ABI also reads the job's environment itself.
CONSUMERS = {
    "bindings/c": ["bootstrap", "base"],
    "bindings/python": [],
    "bindings/torch": [],
    "trainer": [],
    "tools": [],
}
# Headers only their own layer may include: a transport's implementation, which the runtime reaches
# through the interface (transport/transport.hpp) and the transport's factory.
OWN_LAYER_ONLY = {"transport/ucx/worker.hpp": "transport"}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
SOURCES = ("*.hpp", "*.cpp", "*.h", "*.c")


def layer_of(rel, library):
    """The layer (a key of `library` or CONSUMERS) of a path relative to the repository, or None."""
    parts = rel.parts
    if parts[0] == "src" and len(parts) > 2 and parts[1] in library:
        return parts[1]
    for c in CONSUMERS:
        if rel.as_posix().startswith(c + "/"):
            return c
    return None


def check(repo):
    library = read_layers(repo)
    errors = []
    files = 0
    for top in ("src", "bindings", "trainer", "tools"):
        for pattern in SOURCES:
            for path in sorted((repo / top).rglob(pattern)):
                rel = path.relative_to(repo)
                layer = layer_of(rel, library)
                if layer is None:
                    errors.append(f"{rel}: in no layer of src/layers.txt")
                    continue
                files += 1
                allowed = set(library.get(layer, CONSUMERS.get(layer, []))) | {"strata", layer}
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
                    if OWN_LAYER_ONLY.get(spelled, layer) != layer:
                        errors.append(f"{rel}:{n}: layer {layer} includes \"{spelled}\", "
                                      f"which only layer {OWN_LAYER_ONLY[spelled]} may include")
                        continue
                    if target not in allowed:
                        errors.append(f"{rel}:{n}: layer {layer} includes \"{spelled}\" "
                                      f"(layer {target}); it may include "
                                      f"{', '.join(sorted(allowed))}")
    return files, errors


def self_test():
    """A tree with one upward include (base -> runtime), one climbing spelling and one reach into
    a transport's implementation: all three reported."""
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        root = pathlib.Path(d)
        for rel, text in {"src/base/a.cpp": '#include "runtime/op_queue.hpp"\n',
                          "src/runtime/b.cpp": '#include "base/log.hpp"\n#include "../x.hpp"\n'
                                               '#include "transport/ucx/worker.hpp"\n',
                          "src/shm/c.cpp": '#include "kernels/blocks.hpp"\n',
                          "src/layers.txt": "base\nkernels\ntransport\nshm kernels base\n"
                                            "runtime shm transport base\n"}.items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text(text)
        files, errors = check(root)
    expected = ['src/base/a.cpp:1: layer base includes "runtime/op_queue.hpp"',
                'src/runtime/b.cpp:2: #include "../x.hpp" hides its layer',
                'src/runtime/b.cpp:3: layer runtime includes "transport/ucx/worker.hpp", which']
    ok = files == 3 and len(errors) == 3 and all(
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
