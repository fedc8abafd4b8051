"""What `tools/list` publishes of a tool's models, so that the listing fits a reply.

`tools/list` is a reply like any other and stays within the 40,000-byte budget
(docs/decisions/0015-reply-budget.md). A host hands the model a tool's name, description
and input schema, so the input schema keeps every description, constraint and default and
loses only pydantic's automatic `title`s. The output schema is for the client, which
validates each structured result against it: it keeps types, required keys, formats and
nesting, and leaves out titles, descriptions and defaults (what a result field means is
said in its model's field description and docs/design.md section 5). A model deriving
from `Shallow` is declared as an object with its required keys: the proposal, which
eight tools return, would otherwise take 2.6 KB of each of their schemas.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, GetJsonSchemaHandler
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema

_NAMED = frozenset({"properties", "patternProperties", "$defs", "dependentSchemas"})
"""Keywords whose value maps names (never keywords) to schemas."""
_VALUES = frozenset({"enum", "const", "default", "examples", "required"})
"""Keywords whose value is data, not a schema: never walked."""


def _without(schema: Any, keys: frozenset[str], *, open_objects: bool) -> Any:
    if isinstance(schema, list):
        return [_without(s, keys, open_objects=open_objects) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for k, v in schema.items():
        if k in keys or (open_objects and k == "additionalProperties" and v is True):
            continue  # `additionalProperties: true` is what an object allows anyway
        if k in _NAMED:
            out[k] = {n: _without(s, keys, open_objects=open_objects) for n, s in v.items()}
        elif k in _VALUES:
            out[k] = v
        else:
            out[k] = _without(v, keys, open_objects=open_objects)
    return out


def published_input(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` (an argument model's) without pydantic's `title`s."""
    result: dict[str, Any] = _without(schema, frozenset({"title"}), open_objects=False)
    return result


def published_output(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` (a result model's) as a validator needs it: no titles, descriptions,
    defaults or `additionalProperties: true`."""
    keys = frozenset({"title", "description", "default"})
    result: dict[str, Any] = _without(schema, keys, open_objects=True)
    return result


class Shallow(BaseModel):
    """A result model published as an object with its required keys, its fields untyped
    (module docstring)."""

    @classmethod
    def __get_pydantic_json_schema__(
        cls, core_schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        required = [f.alias or n for n, f in cls.model_fields.items() if f.is_required()]
        return {"type": "object", "required": required}
