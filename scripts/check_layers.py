#!/usr/bin/env python3
"""Fails when a layer of the library includes a layer above it (docs/architecture.md).

    scripts/check_layers.py [REPO]        # CTest "layering" runs it
    scripts/check_layers.py --self-test   # shows that it catches an upward include

Every `#include "..."` in the library (src/), its public headers (include/strata/) and its
consumers (bindings/, trainer/, tools/) is spelled from an include root, so its first path
component names the layer it reaches into ("base/log.hpp"). A public header ("strata/store.hpp")
reaches the layer that implements it (PUBLIC_LAYER): an edge like any other, so one through a
public header is caught too. src/layers.txt says which layers each library layer may reach, a
layer in parentheses only through its public headers (the build enforces the same table: each
layer compiles against links to the layers it may reach directly); CONSUMERS below says it for
the rest, who may include every public header but the umbrella's parts of no layer, and
OWN_LAYER_ONLY names the headers no other layer may include (a transport's implementation: the
runtime sees its interface and factory). The trainer's own folders (TRAINER) are checked the
same way, bottom up from model/. A file's own layer is always allowed. Spellings that
climb (`../`) or reach past the roots (`src/...`) are refused: they hide the layer, and the
compiler would find them beside the including file.
"""

import pathlib
import re
import sys


def read_layers(repo):
    """src/layers.txt: each library layer, the layers below it that it may include directly, and
    those it may reach only through their public headers (written in parentheses)."""
    table = {}
    for line in (repo / "src" / "layers.txt").read_text().splitlines():
        if line and not line.startswith("#"):
            layer, *below = line.split()
            direct = {b for b in below if not b.startswith("(")}
            table[layer] = (direct, direct | {b.strip("()") for b in below})
    return table


# The layer that implements each public header. The umbrella header (None) is for consumers only.
PUBLIC_LAYER = {
    "strata/types.hpp": "base",
    "strata/error.hpp": "base",
    "strata/store.hpp": "store",
    "strata/topology.hpp": "topology",
    "strata/work.hpp": "runtime",
    "strata/communicator.hpp": "runtime",
    "strata/version.hpp": "runtime",
    "strata/cost.hpp": "runtime",
    "strata/mesh.hpp": "mesh",
    "strata/sharding.hpp": "sharding",
    "strata/diloco.hpp": "sharding",
    "strata/strata.hpp": None,
}

# Consumers use the public headers; the C ABI also reads the job's environment itself.
CONSUMERS = {
    "bindings/c": ["bootstrap", "base"],
    "bindings/python": [],
    "bindings/torch": ["bindings/python"],  # the Ctrl-C guard's table (bindings/torch/ctrl_c.hpp)
    "trainer": [],
    "planner": ["model", "parallel", "train", "validate"],  # the trainer's formulas and checks
    "tools": [],
    "consumers": [],  # the umbrella header, strata/strata.hpp
}
# The trainer's own folders, bottom up (docs/trainer.md): what each may include besides itself and
# the public headers. "" is the top: the command line and its modes.
TRAINER = {
    "model": [],
    "parallel": ["model"],
    "train": ["parallel", "model"],
    "validate": ["train", "parallel", "model"],
    "": ["validate", "train", "parallel", "model"],
}


# Headers only their own layer may include: a transport's implementation (ucx/, solo/), which the
# runtime reaches through the interface (transport/transport.hpp) and its factory (ucx/factory.hpp).
TRANSPORTS = ("ucx", "solo")


def own_layer_only(spelled):
    for t in TRANSPORTS:
        if spelled.startswith(f"transport/{t}/") and spelled != f"transport/{t}/factory.hpp":
            return "transport"
    return None
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
SOURCES = ("*.hpp", "*.cpp", "*.h", "*.c")


def layer_of(rel, library):
    """The layer (a key of `library` or CONSUMERS) of a path relative to the repository, or None."""
    parts = rel.parts
    if parts[0] == "src" and len(parts) > 2 and parts[1] in library:
        return parts[1]
    if parts[0] == "include" and len(parts) == 3:
        return PUBLIC_LAYER.get("strata/" + parts[2]) or "consumers"
    for c in CONSUMERS:
        if rel.as_posix().startswith(c + "/"):
            return c
    return None


def check(repo):
    library = read_layers(repo)
    errors = []
    files = 0
    for top in ("src", "include", "bindings", "trainer", "planner", "tools"):
        for pattern in SOURCES:
            for path in sorted((repo / top).rglob(pattern)):
                rel = path.relative_to(repo)
                layer = layer_of(rel, library)
                if layer is None:
                    errors.append(f"{rel}: in no layer of src/layers.txt")
                    continue
                files += 1
                for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
                    m = INCLUDE.match(line)
                    if m:
                        error = judge(layer, m.group(1), library)
                        if not error and layer == "trainer":
                            error = judge_trainer(path, rel, m.group(1))
                        if error:
                            errors.append(f"{rel}:{n}: {error}")
    return files, errors


def judge_trainer(path, rel, spelled):
    """Why trainer file `rel` (at `path`) may not include `spelled`, or None: its folders in the
    order of TRAINER, and a bare name only for a file beside the includer."""
    mine = rel.parts[1] if len(rel.parts) > 2 else ""
    if "/" not in spelled:
        if mine == "" or (path.parent / spelled).exists():
            return None
        return f'trainer/{mine} includes "{spelled}", which is not beside it'
    target = spelled.split("/")[0]
    if target not in TRAINER or target == mine or target in TRAINER[mine]:
        return None
    return (f'trainer/{mine or "(top)"} includes "{spelled}" (trainer/{target}); it may include '
            f'{", ".join(TRAINER[mine]) or "nothing of the trainer"}')


def judge(layer, spelled, library):
    """Why `layer` may not include `spelled`, or None when it may."""
    if spelled.startswith("../") or "/../" in spelled or spelled.startswith("src/"):
        return f'#include "{spelled}" hides its layer'
    if "/" not in spelled:
        return None  # a file beside this one
    if layer not in library:  # a consumer: every public header, and CONSUMERS' layers
        target = spelled.split("/")[0]
        if layer == "trainer" and target in TRAINER:
            return None  # judged by judge_trainer
        if target == "strata" or spelled.startswith(layer + "/") or any(
                spelled.startswith(c + "/") for c in CONSUMERS[layer]):
            return None
        return f'{layer} includes "{spelled}"; it may include strata/ and {CONSUMERS[layer]}'
    direct, reached = library[layer]
    owner = own_layer_only(spelled)
    if owner and owner != layer:
        return f'layer {layer} includes "{spelled}", which only layer {owner} may include'
    if spelled.startswith("strata/"):
        if spelled not in PUBLIC_LAYER:
            return f'layer {layer} includes "{spelled}", a public header of no known layer'
        target = PUBLIC_LAYER[spelled]
        if target is None:
            return f'layer {layer} includes the umbrella "{spelled}" (for consumers)'
        if target == layer or target in reached:
            return None
        return (f'layer {layer} includes "{spelled}" (layer {target}, through its public header);'
                f' it may reach {", ".join(sorted(reached | {layer}))}')
    target = spelled.split("/")[0]
    if target == layer or target in direct:
        return None
    how = " only through its public headers" if target in reached else ""
    return (f'layer {layer} includes "{spelled}" (layer {target}){how}; it may include '
            f'{", ".join(sorted(direct | {layer}))}')


def self_test():
    """A tree with one upward include (base -> runtime), one through a public header (base ->
    strata/communicator.hpp, which the runtime implements), one climbing spelling, one reach
    into a transport's implementation and one upward in the trainer (model -> train): all five
    reported."""
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        root = pathlib.Path(d)
        for rel, text in {"src/base/a.cpp": '#include "runtime/op_queue.hpp"\n'
                                            '#include "strata/communicator.hpp"\n',
                          "src/runtime/b.cpp": '#include "base/log.hpp"\n#include "../x.hpp"\n'
                                               '#include "transport/ucx/worker.hpp"\n'
                                               '#include "strata/types.hpp"\n',
                          "src/shm/c.cpp": '#include "kernels/blocks.hpp"\n',
                          "trainer/model/m.cpp": '#include "train/gpt_trainer.hpp"\n',
                          "src/layers.txt": "base\nkernels\ntransport\nshm kernels base\n"
                                            "runtime shm transport base\n"}.items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text(text)
        files, errors = check(root)
    expected = ['src/base/a.cpp:1: layer base includes "runtime/op_queue.hpp"',
                'src/base/a.cpp:2: layer base includes "strata/communicator.hpp" (layer runtime',
                'src/runtime/b.cpp:2: #include "../x.hpp" hides its layer',
                'src/runtime/b.cpp:3: layer runtime includes "transport/ucx/worker.hpp", which',
                'trainer/model/m.cpp:1: trainer/model includes "train/gpt_trainer.hpp"']
    ok = files == 4 and len(errors) == 5 and all(
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
    print(f"check_layers: {files} files, every include (public headers too) goes down or "
          "sideways as src/layers.txt allows")
    return 0


if __name__ == "__main__":
    sys.exit(main())
