#!/usr/bin/env python3
"""Validates deploy/kubernetes against the Kubernetes API's schemas, offline, with kubeconform.

kubeconform fetches its schemas from GitHub by default; here they come from packages:
  - the API's own kinds: the JSON schemas the PyPI package kubernetes-validate carries
    (kubernetes_validate/kubernetes-json-schema/v<VERSION>-local-strict/), whose $refs point
    into a shared _definitions.json; each kind used is written out standalone (its
    definitions inlined), the form kubeconform reads;
  - ServiceMonitor and PrometheusRule: the CRDs the Prometheus Operator's Go module ships
    (example/prometheus-operator-crd/monitoring.coreos.com_{servicemonitors,prometheusrules}.yaml),
    each openAPIV3Schema as a JSON schema (what kubeconform's openapi2jsonschema.py does).
Each kustomization (base, monitoring) is rendered with `kubectl kustomize` and every object
checked with -strict (unknown fields are errors).

  deploy/kubernetes/validate.py --schemas DIR --crd FILE [--crd FILE...] [--kubeconform BIN]
                                [--version 1.31.0]
"""
import argparse
import json
import pathlib
import re
import subprocess
import sys
import tempfile

import yaml

HERE = pathlib.Path(__file__).resolve().parent
REF = re.compile(r"^/api/_definitions\.json(#.*)$")


def rewrite_refs(node):
    if isinstance(node, dict):
        out = {}
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str) and REF.match(value):
                out[key] = REF.match(value).group(1)
            else:
                out[key] = rewrite_refs(value)
        return out
    if isinstance(node, list):
        return [rewrite_refs(v) for v in node]
    return node


def standalone(schema_dir, name, definitions):
    schema = json.loads((schema_dir / name).read_text())
    schema.pop("$id", None)
    schema = rewrite_refs(schema)
    schema["$defs"] = definitions
    return schema


def strict(node):
    """Objects with named properties take no others (openapi2jsonschema's strict form)."""
    if isinstance(node, dict):
        if "properties" in node and "additionalProperties" not in node:
            node["additionalProperties"] = False
        for value in node.values():
            strict(value)
    elif isinstance(node, list):
        for value in node:
            strict(value)
    return node


def crd_schema(crd_file):
    crd = yaml.safe_load(pathlib.Path(crd_file).read_text())
    group = crd["spec"]["group"].split(".")[0]
    kind = crd["spec"]["names"]["kind"].lower()
    out = {}
    for version in crd["spec"]["versions"]:
        schema = strict(version["schema"]["openAPIV3Schema"])
        out[f"{kind}-{group}-{version['name']}.json"] = schema
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--schemas", required=True,
                    help="kubernetes_validate/kubernetes-json-schema of the kubernetes-validate package")
    ap.add_argument("--crd", required=True, action="append",
                    help="a CRD file (repeated): monitoring.coreos.com_servicemonitors.yaml, "
                         "monitoring.coreos.com_prometheusrules.yaml")
    ap.add_argument("--kubeconform", default="kubeconform")
    ap.add_argument("--version", default="1.31.0")
    args = ap.parse_args()

    schema_dir = pathlib.Path(args.schemas) / f"v{args.version}-local-strict"
    definitions = rewrite_refs(json.loads((schema_dir / "_definitions.json").read_text())["$defs"])
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        rendered = []
        for name in ("base", "monitoring"):
            text = subprocess.run(["kubectl", "kustomize", str(HERE / name)], check=True,
                                  capture_output=True, text=True).stdout
            (tmp / f"{name}.yaml").write_text(text)
            rendered.append(tmp / f"{name}.yaml")
        out = tmp / "schemas"
        out.mkdir()
        for doc in (d for f in rendered for d in yaml.safe_load_all(f.read_text()) if d):
            group, _, version = doc["apiVersion"].rpartition("/")
            kind = doc["kind"].lower()
            suffix = f"-{group.split('.')[0]}-{version}" if group else f"-{version}"
            name = f"{kind}{suffix}.json"
            if (schema_dir / name).exists() and not (out / name).exists():
                (out / name).write_text(json.dumps(standalone(schema_dir, name, definitions)))
        for crd in args.crd:
            for name, schema in crd_schema(crd).items():
                (out / name).write_text(json.dumps(schema))
        proc = subprocess.run(
            [args.kubeconform, "-strict", "-summary", "-output", "text",
             "-kubernetes-version", args.version,
             "-schema-location", str(out) + "/{{ .ResourceKind }}{{ .KindSuffix }}.json",
             *map(str, rendered)])
        return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
