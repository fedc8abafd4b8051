"""What `tools/list` publishes of a tool's models, so that the listing fits a reply.

`tools/list` is a reply like any other and stays within the 40,000-byte budget
(docs/decisions/0015-reply-budget.md). A host hands the model a tool's name, description
and input schema, so the input schema keeps every description, constraint and default and
loses only pydantic's automatic `title`s. The output schema is for the client, which
validates each structured result against it: it keeps types, required keys, formats and
nesting, and leaves out titles, descriptions and defaults (what a result field means is
said in its model's field description and docs/design.md section 5); a definition used
once is written where it is used. A model deriving from `Shallow` is declared as an
object with its required keys: the proposal, which eight tools return, would otherwise
take some 2 KB of each of their schemas.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, GetJsonSchemaHandler
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema

_NAMED = frozenset({"properties", "patternProperties", "$defs", "dependentSchemas"})
"""Keywords whose value maps names (never keywords) to schemas."""
_VALUES = frozenset({"enum", "const", "default", "examples", "required", "discriminator"})
"""Keywords whose value is data, not a schema: never walked (a discriminator's mapping is
from tags, which may read as keywords, to references)."""
_DEF = "#/$defs/"


def _each(schema: Any, node: Callable[[dict[str, Any]], dict[str, Any]]) -> Any:
    """`schema` rebuilt with `node` applied to each schema object in it, a parent before
    what it then holds; property names and data values are left alone."""
    if isinstance(schema, list):
        return [_each(s, node) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for k, v in node(schema).items():
        if k in _NAMED:
            out[k] = {n: _each(s, node) for n, s in v.items()}
        else:
            out[k] = v if k in _VALUES else _each(v, node)
    return out


def _without(schema: dict[str, Any], keys: frozenset[str], *, open_objects: bool) -> dict[str, Any]:
    def drop(s: dict[str, Any]) -> dict[str, Any]:
        # `additionalProperties: true` is what an object allows anyway
        opened = open_objects and s.get("additionalProperties") is True
        return {
            k: v
            for k, v in s.items()
            if k not in keys and not (opened and k == "additionalProperties")
        }

    out: dict[str, Any] = _each(schema, drop)
    return out


def _ref(s: dict[str, Any]) -> str | None:
    """The definition `s` refers to, if it does."""
    ref = s.get("$ref")
    return ref.removeprefix(_DEF) if isinstance(ref, str) and ref.startswith(_DEF) else None


def _refs(schema: Any, *, bare: bool = False) -> list[str]:
    """The definition names `schema` refers to, once per `$ref` (`bare`: only by a `$ref`
    with no other keyword beside it, the one an inlining can replace)."""
    found: list[str] = []

    def note(s: dict[str, Any]) -> dict[str, Any]:
        if (name := _ref(s)) is not None and (len(s) == 1 or not bare):
            found.append(name)
        return s

    _each(schema, note)
    return found


def _inline_single_use(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` with each definition referred to once (by a bare `$ref`, and not by
    itself) in its place. One used only by others so used is never reached, so the
    expansion ends."""
    defs: dict[str, Any] = schema.get("$defs", {})
    uses, bare = Counter(_refs(schema)), Counter(_refs(schema, bare=True))
    once = {n for n, d in defs.items() if uses[n] == bare[n] == 1 and n not in _refs(d)}

    def inline(s: dict[str, Any]) -> dict[str, Any]:
        while len(s) == 1 and (name := _ref(s)) in once:
            s = defs[name]
        return s

    out: dict[str, Any] = _each({k: v for k, v in schema.items() if k != "$defs"}, inline)
    kept = {n: _each(d, inline) for n, d in defs.items() if n not in once}
    if kept:
        out["$defs"] = kept
    return out


def published_input(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` (an argument model's) without pydantic's `title`s."""
    return _without(schema, frozenset({"title"}), open_objects=False)


def published_output(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` (a result model's) as a validator needs it: no titles, descriptions,
    defaults, discriminators or `additionalProperties: true`, and no definition used
    once."""
    keys = frozenset({"title", "description", "default", "discriminator"})
    return _inline_single_use(_without(schema, keys, open_objects=True))


class Shallow(BaseModel):
    """A result model published as an object with its required keys, its fields untyped
    (module docstring)."""

    @classmethod
    def __get_pydantic_json_schema__(
        cls, core_schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        required = [f.alias or n for n, f in cls.model_fields.items() if f.is_required()]
        return {"type": "object", "required": required}
