"""What `tools/list` publishes of a model's JSON schema (placet.server.schemas;
docs/decisions/0015-reply-budget.md): keywords are dropped, names and data values kept,
a definition used once is written in its place, a `Shallow` model is its required keys.
"""

from __future__ import annotations

import json
import re
from typing import Any

import jsonschema
import pytest
from pydantic import BaseModel, Field

from placet.server.schemas import Shallow, published_input, published_output

STR_OR_NULL = {"anyOf": [{"type": "string"}, {"type": "null"}]}

OUTPUT_CASES: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
    (
        "keywords go, names that read as keywords stay",
        {
            "title": "Out",
            "type": "object",
            "properties": {
                "title": {"title": "Title", "type": "string", "description": "d"},
                "examples": {"type": "array", "items": {"type": "string"}, "default": []},
                "extra": {"type": "object", "additionalProperties": True},
                "closed": {"type": "object", "additionalProperties": False},
            },
            "required": ["title", "description"],
        },
        {
            "type": "object",
            "properties": {
                "title": {"type": "string"},
                "examples": {"type": "array", "items": {"type": "string"}},
                "extra": {"type": "object"},
                "closed": {"type": "object", "additionalProperties": False},
            },
            "required": ["title", "description"],
        },
    ),
    (
        "data values are not walked",
        {"enum": [{"title": "x"}], "const": {"description": "y"}},
        {"enum": [{"title": "x"}], "const": {"description": "y"}},
    ),
    (
        "used once: inlined, also through another definition; used twice: kept",
        {
            "type": "object",
            "properties": {
                "a": {"$ref": "#/$defs/A"},
                "b1": {"$ref": "#/$defs/B"},
                "b2": {"items": {"$ref": "#/$defs/B"}, "type": "array"},
            },
            "$defs": {
                "A": {"type": "object", "properties": {"c": {"$ref": "#/$defs/C"}}},
                "B": {"type": "integer", "title": "B"},
                "C": {"type": "string"},
            },
        },
        {
            "type": "object",
            "properties": {
                "a": {"type": "object", "properties": {"c": {"type": "string"}}},
                "b1": {"$ref": "#/$defs/B"},
                "b2": {"items": {"$ref": "#/$defs/B"}, "type": "array"},
            },
            "$defs": {"B": {"type": "integer"}},
        },
    ),
    (
        "used once beside another keyword: kept, so the reference resolves",
        {
            "properties": {"a": {"$ref": "#/$defs/A", "deprecated": True, "title": "A"}},
            "$defs": {"A": {"type": "integer"}},
        },
        {
            "properties": {"a": {"$ref": "#/$defs/A", "deprecated": True}},
            "$defs": {"A": {"type": "integer"}},
        },
    ),
    (
        "a discriminator is no validator's: it goes, tags named as keywords and all",
        {
            "properties": {
                "u": {
                    "oneOf": [{"$ref": "#/$defs/D"}, {"$ref": "#/$defs/T"}],
                    "discriminator": {
                        "propertyName": "kind",
                        "mapping": {"default": "#/$defs/D", "title": "#/$defs/T"},
                    },
                }
            },
            "$defs": {
                "D": {"properties": {"kind": {"const": "default"}}},
                "T": {"properties": {"kind": {"const": "title"}}},
            },
        },
        {
            "properties": {
                "u": {
                    "oneOf": [
                        {"properties": {"kind": {"const": "default"}}},
                        {"properties": {"kind": {"const": "title"}}},
                    ]
                }
            }
        },
    ),
    (
        "a definition that refers to itself stays a definition",
        {
            "properties": {"tree": {"$ref": "#/$defs/T"}},
            "$defs": {"T": {"properties": {"kids": {"items": {"$ref": "#/$defs/T"}}}}},
        },
        {
            "properties": {"tree": {"$ref": "#/$defs/T"}},
            "$defs": {"T": {"properties": {"kids": {"items": {"$ref": "#/$defs/T"}}}}},
        },
    ),
]


@pytest.mark.parametrize(
    ("case", "schema", "published"), OUTPUT_CASES, ids=[c[0] for c in OUTPUT_CASES]
)
def test_published_output(case: str, schema: dict[str, Any], published: dict[str, Any]) -> None:
    assert published_output(schema) == published, case
    jsonschema.Draft202012Validator.check_schema(published)
    defined = {f"#/$defs/{n}" for n in published.get("$defs", {})}
    assert set(re.findall(r'"\$ref": "([^"]*)"', json.dumps(published))) <= defined, case


def test_published_input_keeps_a_discriminator_whole() -> None:
    union = {
        "oneOf": [{"$ref": "#/$defs/T"}],
        "discriminator": {"propertyName": "kind", "mapping": {"title": "#/$defs/T"}},
    }
    schema = {"properties": {"u": union}, "$defs": {"T": {"title": "T", "type": "object"}}}
    assert published_input(schema) == {
        "properties": {"u": union},
        "$defs": {"T": {"type": "object"}},
    }


def test_published_input_keeps_descriptions_constraints_and_defaults() -> None:
    schema = {
        "title": "fArguments",
        "type": "object",
        "properties": {
            "n": {"title": "N", "type": "integer", "maximum": 5, "default": 1, "description": "d"},
            "x": {"title": "X", **STR_OR_NULL, "default": None},
        },
        "additionalProperties": False,
    }
    assert published_input(schema) == {
        "type": "object",
        "properties": {
            "n": {"type": "integer", "maximum": 5, "default": 1, "description": "d"},
            "x": {**STR_OR_NULL, "default": None},
        },
        "additionalProperties": False,
    }


class Inner(BaseModel):
    deep: int


class Held(Shallow):
    a: int = Field(description="an int")
    b: Inner | None
    c: str = "left out when absent"


class Holder(BaseModel):
    held: Held
    many: list[Held]


def test_a_shallow_model_is_an_object_with_its_required_keys() -> None:
    published = published_output(Holder.model_json_schema())
    shallow = {"type": "object", "required": ["a", "b"]}
    assert published == {
        "type": "object",
        "properties": {
            "held": {"$ref": "#/$defs/Held"},
            "many": {"type": "array", "items": {"$ref": "#/$defs/Held"}},
        },
        "required": ["held", "many"],
        "$defs": {"Held": shallow},
    }
    value = Holder(held=Held(a=1, b=Inner(deep=2)), many=[]).model_dump(mode="json")
    jsonschema.validate(value, published)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**value, "held": {"a": 1}}, published)
