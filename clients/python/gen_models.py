#!/usr/bin/env python3
"""Writes strata_client/models.py from Strata's OpenAPI document.

    python gen_models.py openapi.json > strata_client/models.py
    python gen_models.py http://127.0.0.1:8750/openapi.json > strata_client/models.py

Every component schema becomes a type: an object a ``TypedDict`` (fields
the schema does not require are ``NotRequired``), a string enum a
``Literal``, a ``oneOf`` a ``Union``, a plain type an alias. The output is
deterministic (classes, then aliases, sorted), so ``tests/test_models_drift.py``
regenerates it from a live server and fails when the committed file differs.
"""
import json
import sys
import urllib.request

PRIMITIVE = {"string": "str", "integer": "int", "number": "float", "boolean": "bool", "null": "None"}


def ref_name(ref):
    return ref.rsplit("/", 1)[-1]


def py_type(s):
    """The Python type of schema `s`, as source text."""
    if not s:
        return "Any"
    if "$ref" in s:
        return f'"{ref_name(s["$ref"])}"'
    if "allOf" in s:
        # one part: that type; several: their merged object
        return py_type(s["allOf"][0]) if len(s["allOf"]) == 1 else "Dict[str, Any]"
    for key in ("oneOf", "anyOf"):
        if key in s:
            parts = [py_type(p) for p in s[key]]
            non_null = [p for p in parts if p != "None"]
            unique = list(dict.fromkeys(non_null))
            inner = unique[0] if len(unique) == 1 else f"Union[{', '.join(unique)}]"
            return f"Optional[{inner}]" if "None" in parts else inner
    if "enum" in s:
        return "Literal[" + ", ".join(json.dumps(v) for v in s["enum"]) + "]"
    t = s.get("type")
    if isinstance(t, list):
        parts = [py_type({**s, "type": x}) for x in t]
        non_null = [p for p in parts if p != "None"]
        inner = non_null[0] if len(non_null) == 1 else f"Union[{', '.join(non_null)}]"
        return f"Optional[{inner}]" if "None" in parts else inner
    if t == "array":
        return f"List[{py_type(s.get('items', {}))}]"
    if t == "object":
        return "Dict[str, Any]"
    return PRIMITIVE.get(t, "Any")


def doc(s):
    text = (s.get("description") or "").strip().splitlines()
    return text[0].replace('"""', "'''") if text else ""


def generate(spec):
    schemas = spec["components"]["schemas"]
    out = [
        '"""Types of Strata\'s HTTP API, generated from /openapi.json by gen_models.py: do not edit."""',
        "# ruff: noqa",
        "from typing import Any, Dict, List, Literal, NotRequired, Optional, TypedDict, Union",
        "",
    ]
    is_class = {n for n, s in schemas.items() if s.get("type") == "object" and "properties" in s}
    for name in sorted(is_class):
        s = schemas[name]
        out.append("")
        out.append(f"class {name}(TypedDict):")
        d = doc(s)
        if d:
            out.append(f'    """{d}"""')
        required = set(s.get("required", []))
        for field in sorted(s["properties"]):
            t = py_type(s["properties"][field])
            if field not in required:
                t = f"NotRequired[{t}]"
            out.append(f"    {field}: {t}")
        if not s["properties"]:
            out.append("    pass")
        out.append("")
    # aliases after the classes, each after the aliases it names (module-level names)
    aliases = sorted(n for n in schemas if n not in is_class)
    done, order = set(), []

    def visit(n, seen=()):
        if n in done or n in seen:
            return
        for dep in aliases:
            if f'"{dep}"' in py_type(schemas[n]) and dep != n:
                visit(dep, seen + (n,))
        done.add(n)
        order.append(n)

    for n in aliases:
        visit(n)
    out.append("")
    for name in order:
        s = schemas[name]
        d = doc(s)
        if d:
            out.append(f"# {d}")
        out.append(f"{name} = {py_type(s).replace(chr(34), '') if 'Literal' not in py_type(s) else py_type(s)}")
    return "\n".join(out).rstrip() + "\n"


def load(src):
    if src.startswith("http://") or src.startswith("https://"):
        with urllib.request.urlopen(src, timeout=30) as r:
            return json.load(r)
    with open(src, encoding="utf-8") as f:
        return json.load(f)


if __name__ == "__main__":
    sys.stdout.write(generate(load(sys.argv[1])))
