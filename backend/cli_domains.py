"""`rlwb domains add | update | remove | export | import`: the user's own domains.

    rlwb domains add sums.yaml                        # a definition file (YAML/JSON) naming its data file
    rlwb domains add --data q.jsonl --name sums --prompt question --answer answer --verifier numeric
    rlwb domains update sums.yaml                     # a new version of a stored domain
    rlwb domains add --data q.csv --name graded --prompt q --answer a --reward-file reward.py
    rlwb domains export sums sums.rlwb.json; rlwb domains import sums.rlwb.json --name sums_copy
    rlwb domains remove sums

A definition is `domains.user.spec.UserDomainSpec` plus `data` (the file's path, relative
to the definition) and optionally `format`; flags override its fields. Nothing is stored
unless every row builds and the domain passes the contract check. Then run
`rlwb domains validate NAME` before it joins a mix (a domain that fails can't).

Not covered: the page's form (`app/pages/`), the domain itself (`domains.user`).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from backend.cli_common import open_store
from core.errors import ConfigError

_FLAG_FIELDS = {"name": ("name",), "description": ("description",), "prompt": ("columns", "prompt"),
                "template": ("columns", "template"), "answer": ("columns", "answer"),
                "system": ("columns", "system"), "level": ("columns", "level"), "id": ("columns", "id"),
                "verifier": ("verifier", "kind"), "extraction": ("extraction",),
                "heldout_fraction": ("heldout_fraction",), "data": ("data",), "format": ("format",)}


def _definition(args) -> dict:
    """The definition file (if given) with the flags' fields laid over it."""
    # on first use: it pulls in the domain families
    from domains.user.library import load_definition

    definition = load_definition(args.definition) if args.definition else {}
    for flag, path in _FLAG_FIELDS.items():
        value = getattr(args, flag, None)
        if value is None:
            continue
        if flag == "data":
            value = str(Path(value).resolve())
        node = definition
        for key in path[:-1]:
            node = node.setdefault(key, {})
            if not isinstance(node, dict):
                raise ConfigError(f"domain field '{key}': a mapping of fields")
        node[path[-1]] = value
    if not isinstance(definition.get("verifier", {}), dict):
        raise ConfigError("domain field 'verifier': a mapping of fields, e.g. {kind: numeric, rel_tol: 0.01}")
    if getattr(args, "reward_file", None):
        if args.verifier not in (None, "python"):
            raise ConfigError(f"--reward-file is the python verifier's; drop --verifier {args.verifier} or the file")
        try:
            source = Path(args.reward_file).read_text(encoding="utf-8")
        except UnicodeDecodeError:
            raise ConfigError(f"--reward-file {args.reward_file}: not UTF-8 text") from None
        definition.setdefault("verifier", {}).update(kind="python", source=source)
    if args.verifier_options:
        try:
            options = json.loads(args.verifier_options)
        except json.JSONDecodeError as e:
            raise ConfigError(f"--verifier-options: not JSON ({e.msg}); e.g. '{{\"rel_tol\": 0.01}}'") from None
        if not isinstance(options, dict):
            raise ConfigError("--verifier-options: a JSON object, e.g. '{\"rel_tol\": 0.01}'")
        definition.setdefault("verifier", {}).update(options)
    if not definition:
        raise ConfigError("give a definition file or --data, --name, --prompt/--template and --answer")
    return definition


def _saved(args, new: bool) -> int:
    # on first use: it pulls in the domain families
    from domains.user.library import add_domain

    d = add_domain(open_store(args), _definition(args), note=args.note, new=new)
    train = sum(len(v) for (lvl, held), v in d.sides.items() if not held)
    print(f"{d.name} version {d.version}: {len(d.rows)} rows ({train} training, {len(d.rows) - train} held out), "
          f"levels {sorted(d.levels)}, {d.spec.verifier.kind} verifier, {d.spec.extraction} extraction; "
          f"check it with `rlwb domains validate {d.name}`, then add it to a mix")
    return 0


def cmd_domains_add(args) -> int:
    return _saved(args, new=True)


def cmd_domains_update(args) -> int:
    return _saved(args, new=False)


def cmd_domains_remove(args) -> int:
    # on first use: it pulls in the domain families
    from domains.user.library import remove_domain

    hidden = remove_domain(open_store(args), args.name)
    print(f"{args.name}: removed from the catalogue ({hidden} version(s) kept for the runs that used them)")
    return 0


def cmd_domains_export(args) -> int:
    # on first use: it pulls in the domain families
    from domains.user.library import export_domain

    path = export_domain(open_store(args), args.name, args.file, version=args.version)
    print(f"{args.name}: written to {path}")
    return 0


def cmd_domains_import(args) -> int:
    # on first use: it pulls in the domain families
    from domains.user.library import import_domain

    d = import_domain(open_store(args), args.file, name=args.name, note=args.note)
    print(f"{d.name} version {d.version}: {len(d.rows)} rows imported; check it with `rlwb domains validate {d.name}`")
    return 0


def _definition_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("definition", nargs="?", help="definition file (YAML or JSON): name, columns, verifier, "
                                                 "extraction, heldout_fraction, data")
    p.add_argument("--data", help="the data file: .jsonl, .json, .csv, .parquet or a datasets directory")
    p.add_argument("--format", choices=["jsonl", "json", "csv", "parquet", "datasets"], help="(default: by suffix)")
    p.add_argument("--name", help="domain name: lower-case letters, digits and _")
    p.add_argument("--description", help="one line for the catalogue")
    p.add_argument("--prompt", help="the prompt column")
    p.add_argument("--template", help="a Jinja2 prompt template over the columns, e.g. 'Convert {{ value }} km'")
    p.add_argument("--answer", help="the reference-answer column")
    p.add_argument("--system", help="a per-row system prompt column")
    p.add_argument("--level", help="a difficulty level column (whole numbers >= 1)")
    p.add_argument("--id", help="a unique row id column (the held-out split hashes it)")
    p.add_argument("--verifier", choices=["exact", "numeric", "math", "choice", "regex", "json", "code_tests", "python"])
    p.add_argument("--reward-file", dest="reward_file", help="a Python file defining reward(reply, answer, row) -> "
                                                            "0..1 (the python verifier; it runs in a sandbox)")
    p.add_argument("--verifier-options", help="JSON, e.g. '{\"rel_tol\": 0.01}' or '{\"pattern\": \"[0-9]+\"}'")
    p.add_argument("--extraction", choices=["answer_line", "tags", "boxed", "last_number", "whole"])
    p.add_argument("--heldout-fraction", dest="heldout_fraction", type=float, help="share held out (0.05-0.5)")
    p.add_argument("--note", default="", help="what this version is for")


def register(doms: argparse._SubParsersAction) -> None:
    """Add the user-domain commands to `rlwb domains`."""
    a = doms.add_parser("add", help="add your own domain from a data file (a definition file or flags)")
    _definition_args(a)
    a.set_defaults(fn=cmd_domains_add)
    u = doms.add_parser("update", help="store a new version of one of your domains")
    _definition_args(u)
    u.set_defaults(fn=cmd_domains_update)
    r = doms.add_parser("remove", help="remove one of your domains from the catalogue")
    r.add_argument("name")
    r.set_defaults(fn=cmd_domains_remove)
    e = doms.add_parser("export", help="write one of your domains (definition and rows) to a JSON file")
    e.add_argument("name")
    e.add_argument("file")
    e.add_argument("--version", type=int, default=None, help="(default: the newest)")
    e.set_defaults(fn=cmd_domains_export)
    i = doms.add_parser("import", help="add a domain from an exported JSON file")
    i.add_argument("file")
    i.add_argument("--name", default=None, help="store it under another name")
    i.add_argument("--note", default="")
    i.set_defaults(fn=cmd_domains_import)
