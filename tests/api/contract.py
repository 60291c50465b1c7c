"""Reading `openapi.yaml`: its comparable outline, and a small validator of answers against it.

`outline(spec)` keeps what a client relies on and drops the prose: per operation its id, tags,
parameters (name, place, required, type, enum, bounds, default) and responses (status, media
types with body shapes, header names); per component schema its properties' shapes, required
names and whether extra properties are allowed. Two specs that agree on their outlines serve
the same API. `conforms` checks a JSON body against a schema of the spec.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
CONTRACT = ROOT / "openapi.yaml"
_PARAMETER_KEYWORDS = ("enum", "minimum", "maximum", "default")


def load_contract() -> dict[str, Any]:
    import yaml

    with CONTRACT.open(encoding="utf-8") as handle:
        return yaml.safe_load(handle)  # type: ignore[no-any-return]


def resolve(spec: dict[str, Any], node: Any) -> Any:
    """Follow local `$ref`s ("#/components/...") until a plain object."""
    while isinstance(node, dict) and "$ref" in node:
        target: Any = spec
        for part in node["$ref"].removeprefix("#/").split("/"):
            target = target[part]
        node = target
    return node


def shape(schema: dict[str, Any]) -> str:
    """A schema in one word: a component name, a JSON type, `array[...]`, or `any`."""
    if "$ref" in schema:
        return str(schema["$ref"]).rsplit("/", 1)[-1]
    if "anyOf" in schema:
        kinds = sorted(shape(s) for s in schema["anyOf"] if s.get("type") != "null")
        return "|".join(kinds)
    kind = schema.get("type")
    if kind == "array":
        return f"array[{shape(schema.get('items', {}))}]"
    return str(kind) if kind else "any"


def _parameter(spec: dict[str, Any], parameter: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    parameter = resolve(spec, parameter)
    schema = parameter.get("schema", {})
    summary = {"required": bool(parameter.get("required", False)), "type": shape(schema)}
    summary.update({k: schema[k] for k in _PARAMETER_KEYWORDS if k in schema})
    return f"{parameter['in']} {parameter['name']}", summary


def _response(spec: dict[str, Any], response: dict[str, Any]) -> dict[str, Any]:
    response = resolve(spec, response)
    return {
        "content": {media: shape(body.get("schema", {})) for media, body in response.get("content", {}).items()},
        "headers": sorted(response.get("headers", {})),
    }


def outline(spec: dict[str, Any]) -> dict[str, Any]:
    """What two specs must share to describe the same API (see the module doc)."""
    operations = {}
    for path, item in spec.get("paths", {}).items():
        for method, operation in item.items():
            operations[f"{method.upper()} {path}"] = {
                "operationId": operation.get("operationId"),
                "tags": operation.get("tags", []),
                "parameters": dict(_parameter(spec, p) for p in operation.get("parameters", [])),
                "responses": {str(s): _response(spec, r) for s, r in operation.get("responses", {}).items()},
            }
    schemas = {
        name: {
            "properties": {prop: shape(s) for prop, s in schema.get("properties", {}).items()},
            "required": sorted(schema.get("required", [])),
            "additionalProperties": bool(schema.get("additionalProperties", False)),
        }
        for name, schema in spec.get("components", {}).get("schemas", {}).items()
    }
    return {"version": spec.get("info", {}).get("version"), "operations": operations, "schemas": schemas}


def differences(contract: Any, served: Any, where: str = "") -> list[str]:
    """Readable lines, one per place where the contract and the served outline differ."""
    if isinstance(contract, dict) and isinstance(served, dict):
        lines = []
        for key in sorted(set(contract) | set(served), key=str):
            here = f"{where} / {key}" if where else str(key)
            if key not in served:
                lines.append(f"{here}: in openapi.yaml, not served")
            elif key not in contract:
                lines.append(f"{here}: served, not in openapi.yaml")
            else:
                lines += differences(contract[key], served[key], here)
        return lines
    if contract != served:
        return [f"{where}: openapi.yaml says {contract!r}, the app serves {served!r}"]
    return []


def conforms(spec: dict[str, Any], schema: dict[str, Any], value: Any, where: str = "body") -> list[str]:
    """Where `value` breaks `schema` (types, required properties, array items); empty if it conforms."""
    schema = resolve(spec, schema)
    kind = schema.get("type")
    checks = {"object": dict, "array": list, "string": str, "boolean": bool}
    if kind == "integer":
        return [] if isinstance(value, int) and not isinstance(value, bool) else [f"{where}: not an integer: {value!r}"]
    if kind in checks and not isinstance(value, checks[kind]):
        return [f"{where}: not {kind}: {value!r}"]
    problems = []
    if kind == "object":
        problems += [f"{where}: missing {name!r}" for name in schema.get("required", []) if name not in value]
        for name, sub in schema.get("properties", {}).items():
            if name in value:
                problems += conforms(spec, sub, value[name], f"{where}.{name}")
    if kind == "array":
        for index, item in enumerate(value):
            problems += conforms(spec, schema.get("items", {}), item, f"{where}[{index}]")
    return problems
