"""Causes kept: an exception raised while handling another names it as its cause
(`raise Ours(...) from exc`), so `GEADMIN_DEBUG=1`, the logs and a bug report show what really
happened underneath; `from None` and a bare `raise Ours(...)` inside a handler are refused."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MODELS_REPOSITORY = "model_repository"  # Triton's sample models: not geadmin's code


def dropped_causes(source: str, name: str = "<planted>") -> list[str]:
    """`line: what` for every raise inside an except handler that drops the exception being
    handled: `from None`, or a new exception with no `from` at all. Re-raising the caught
    exception itself (`raise` or `raise exc`) keeps it, and so does any other `from`."""
    found = []

    def visit(node: ast.AST, handled: tuple[str | None, ...]) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
                visit(child, ())  # a function defined in a handler runs later, elsewhere
            elif isinstance(child, ast.ExceptHandler):
                visit(child, (*handled, child.name))
            else:
                if isinstance(child, ast.Raise) and handled and child.exc is not None:
                    reraised = isinstance(child.exc, ast.Name) and child.exc.id in handled
                    if isinstance(child.cause, ast.Constant) and child.cause.value is None:
                        found.append(f"{name}:{child.lineno}: from None")
                    elif child.cause is None and not reraised:
                        found.append(f"{name}:{child.lineno}: no `from`")
                visit(child, handled)

    visit(ast.parse(source), ())
    return found


def test_no_handler_in_geadmin_or_pages_drops_the_cause() -> None:
    found = []
    for root in (ROOT / "geadmin", ROOT / "pages"):
        for path in sorted(root.rglob("*.py")):
            if MODELS_REPOSITORY not in path.relative_to(root).parts:
                found += dropped_causes(path.read_text(), str(path.relative_to(ROOT)))
    assert found == [], "write `except X as exc: raise Ours(...) from exc`:\n" + "\n".join(found)


def test_the_check_finds_planted_drops_and_spares_what_keeps_the_cause() -> None:
    planted = "\n".join([
        "def f():",                                      # 1
        "    try:",                                      # 2
        "        g()",                                   # 3
        "    except KeyError:",                          # 4
        "        raise ValueError('x') from None",       # 5: dropped
        "    except OSError as exc:",                    # 6
        "        raise RuntimeError('y')",               # 7: dropped (no from)
        "    except TypeError as exc:",                  # 8
        "        raise RuntimeError('z') from exc",      # 9: kept
        "    except IndexError as exc:",                 # 10
        "        raise exc",                             # 11: the same exception
        "    except ZeroDivisionError:",                 # 12
        "        raise",                                 # 13: the same exception
        "    except LookupError as exc:",                # 14
        "        def later():",                          # 15
        "            raise ValueError('w')",             # 16: not raised while handling
        "        return later",                          # 17
        "    raise ValueError('outside') from None",     # 18: no handler: nothing to drop
    ])
    assert dropped_causes(planted) == ["<planted>:5: from None", "<planted>:7: no `from`"]
