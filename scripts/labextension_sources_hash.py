#!/usr/bin/env python3
"""One SHA-256 over the frontend's sources (labextension/src, style, schema, package.json and its
lockfile, tsconfig.json): what labextension/prebuilt/kwd-sources.sha256 records it was built
from, so a test can tell a stale prebuilt/ without Node.js."""
import hashlib
from pathlib import Path

root = Path(__file__).resolve().parent.parent / "labextension"
files = sorted([*root.glob("src/*"), *root.glob("style/*"), *root.glob("schema/*"),
                *(root / name for name in ("package.json", "package-lock.json", "tsconfig.json"))])
digest = hashlib.sha256()
for f in files:
    digest.update(f.relative_to(root).as_posix().encode() + b"\0" + f.read_bytes() + b"\0")
print(digest.hexdigest())
