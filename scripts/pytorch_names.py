"""Which PyTorch names a program uses, and whether rtxcore has each.

    python scripts/pytorch_names.py train.py model.py ...      # a table per name
    python scripts/pytorch_names.py --names-only DIR ...       # the names, one a line

Reads each file with ``ast`` (nothing is run): every ``torch...`` path reached
through the file's imports (``torch.nn.functional.relu``, ``optim.lr_scheduler.StepLR``,
``from torch.utils.data import DataLoader``), and every attribute the file takes
from some object that is a ``torch.Tensor``, ``nn.Module`` or optimizer attribute
(``x.view``, ``model.eval``, ``opt.zero_grad``; which object is not known without
running the program, so a name any of those types has is counted). PyTorch must be
importable to classify method names; without it only ``torch...`` paths are found.

Each name is then looked up in rtxcore under the same path (``torch`` is
``rtxcore``): ``ok`` (there), ``refused`` (raises rtxcore's out-of-scope error,
which says what to do instead) or ``MISSING``. The exit status is 1 when any name
is missing.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import sys
from collections import Counter
from pathlib import Path
from typing import Any, Iterable

# what a method-name is checked on, by the PyTorch class that has it
KINDS = (("Tensor", "torch", "Tensor"), ("Module", "torch.nn", "Module"),
         ("Optimizer", "torch.optim", "Optimizer"))


def _aliases(tree: ast.AST) -> dict[str, str]:
    """Local name -> the torch path it stands for, from the file's imports."""
    out: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name == "torch" or a.name.startswith("torch."):
                    if a.asname:
                        out[a.asname] = a.name
                    else:
                        out["torch"] = "torch"
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "torch" or node.module.startswith("torch."):
                for a in node.names:
                    if a.name != "*":
                        out[a.asname or a.name] = f"{node.module}.{a.name}"
    return out


def _chain(node: ast.AST) -> list[str] | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return parts[::-1]
    return None


def names_in(source: str, method_names: dict[str, set[str]]) -> Counter:
    """The PyTorch names a program's source uses, with how often."""
    tree = ast.parse(source)
    alias = _aliases(tree)
    found: Counter = Counter()
    for full in alias.values():
        found[full] += 1
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute):
            continue
        chain = _chain(node)
        if chain and chain[0] in alias:
            found[".".join([alias[chain[0]], *chain[1:]])] += 1
            continue
        for kind, names in method_names.items():
            if node.attr in names:
                found[f"{kind}.{node.attr}"] += 1
    # keep the longest paths only: torch.nn.functional.relu, not also torch.nn
    paths = [n for n in found if n.startswith("torch")]
    for p in paths:
        if any(q != p and q.startswith(p + ".") for q in paths):
            del found[p]
    return found


def _torch_method_names() -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    try:
        for kind, module, cls in KINDS:
            obj = getattr(importlib.import_module(module), cls)
            out[kind] = {n for n in dir(obj) if not n.startswith("_")}
    except ImportError:
        return {}
    return out


def _module_prefix(parts: list[str]) -> tuple[Any, list[str]]:
    """The deepest rtxcore module named by a prefix of ``parts`` (after "torch"),
    and the attribute path left."""
    mod = importlib.import_module("rtxcore")
    rest = parts[1:]
    while rest:
        try:
            mod = importlib.import_module(f"{mod.__name__}.{rest[0]}")
        except ModuleNotFoundError as e:
            if e.name != f"{mod.__name__}.{rest[0]}":
                raise
            break
        except ImportError:
            raise
        rest = rest[1:]
    return mod, rest


def status(name: str) -> str:
    """``ok``, ``refused`` or ``MISSING`` for a name as ``names_in`` gives it."""
    from rtxcore._unbuilt import UnbuiltAttributeError, UnbuiltModuleError

    import rtxcore
    import rtxcore.nn
    import rtxcore.optim

    parts = name.split(".")
    try:
        if parts[0] in ("Tensor", "Module", "Optimizer"):
            owner = {"Tensor": rtxcore.Tensor, "Module": rtxcore.nn.Module,
                     "Optimizer": rtxcore.optim.Optimizer}[parts[0]]
            if hasattr(owner, parts[1]):
                return "ok"
            # instance attributes (x.grad, model.training, opt.param_groups)
            sample = {"Tensor": lambda: rtxcore.ones(1),
                      "Module": lambda: rtxcore.nn.Linear(1, 1),
                      "Optimizer": lambda: rtxcore.optim.SGD([rtxcore.nn.Parameter(
                          rtxcore.ones(1))], lr=0.1)}[parts[0]]()
            getattr(sample, parts[1])
            return "ok"
        obj, rest = _module_prefix(parts)
        for p in rest:
            obj = getattr(obj, p)
        return "ok"
    except (UnbuiltAttributeError, UnbuiltModuleError):
        return "refused"
    except (AttributeError, ImportError):
        return "MISSING"


def _files(paths: Iterable[str]) -> list[Path]:
    out = []
    for p in map(Path, paths):
        out.extend(sorted(p.rglob("*.py")) if p.is_dir() else [p])
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("paths", nargs="+", help="Python files or folders of them")
    ap.add_argument("--names-only", action="store_true", help="print the names found, no lookup")
    args = ap.parse_args(argv)
    methods = _torch_method_names()
    total: Counter = Counter()
    for f in _files(args.paths):
        try:
            total.update(names_in(f.read_text(encoding="utf-8"), methods))
        except SyntaxError as e:
            print(f"{f}: not Python 3 ({e.msg}, line {e.lineno}); skipped", file=sys.stderr)
    if args.names_only:
        print("\n".join(sorted(total)))
        return 0
    counts: Counter = Counter()
    for name in sorted(total):
        s = status(name)
        counts[s] += 1
        print(f"{s:8} {total[name]:5}  {name}")
    print(f"\n{len(total)} names: {counts['ok']} ok, {counts['refused']} refused with a reason, "
          f"{counts['MISSING']} missing")
    return 1 if counts["MISSING"] else 0


if __name__ == "__main__":
    sys.exit(main())
