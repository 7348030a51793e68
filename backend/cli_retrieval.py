"""`rlwb retrieval ...` and `rlwb eval context-length`: document collections and the needle sweep.

    rlwb retrieval index NAME FILE...       chunk, embed and index files into a named collection
    rlwb retrieval search NAME QUESTION     coarse search, fine ranking and the assembled context
    rlwb eval context-length MODEL          needle sweep over haystack lengths and depths, with
                                            and without retrieval (the Retrieval page's heat map)

Thin wrappers over `retrieval.pipeline` and `trainer.context_length`; `register` and
`register_context_length` add them to the `rlwb` parser. Context budgets default to
`retrieval.context.DEFAULT_BUDGET_TOKENS`.

Each command imports what it runs inside its function (start-up speed: `rlwb --help` builds
the parser in ~0.2 s without the store, torch, vLLM or the domain families).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from core.choices import ROLLOUT_ENGINES
from backend.cli_common import open_store, positive
from core.errors import DocumentError
from retrieval.context import DEFAULT_BUDGET_TOKENS
from trainer.models import resolve_model
from trainer.context_length import SweepConfig, model_window, run_sweep
from retrieval.documents import read_document


def cmd_eval_context_length(args) -> int:
    from transformers import AutoTokenizer


    cfg = SweepConfig(lengths=args.lengths, depths=args.depths, haystacks=args.haystacks,
                      budget_tokens=args.budget, window_tokens=args.window,
                      model_needles=0 if args.evidence_only else min(args.model_needles, args.haystacks))
    path = resolve_model(args.model)
    tokenizer = AutoTokenizer.from_pretrained(path)
    engine = None
    if not args.evidence_only:
        # on first use: it pulls in torch, numpy
        from trainer.rollout import open_engine

        print(f"rollout engine: {args.engine} ({path})", file=sys.stderr)
        engine = open_engine(args.engine, path, seed=cfg.seed, max_model_len=model_window(path, cfg)) \
            if args.engine == "vllm" else open_engine("hf", path, seed=cfg.seed)
    try:
        result = run_sweep(tokenizer, cfg, engine=engine, model_path=path,
                           progress=lambda line: print(line, file=sys.stderr))
    finally:
        if engine is not None:
            engine.close()
    sweep_id = open_store(args).record_context_sweep(args.model, result)
    print(f"{'length':>9} {'depth':>5}  {'evidence(retrieval)':>19} {'evidence(full)':>14} "
          f"{'acc(retrieval)':>14} {'acc(full)':>9} {'mention(retrieval)':>18} {'mention(full)':>13}")
    cells = {(c["length"], c["depth"], c["mode"]): c for c in result["cells"]}
    fmt = lambda v: "-" if v is None else f"{v:.2f}"
    for length in cfg.lengths:
        for depth in cfg.depths:
            r, f = cells.get((length, depth, "retrieval"), {}), cells.get((length, depth, "full"), {})
            print(f"{length:>9,} {depth:>4}%  {fmt(r.get('evidence_rate')):>19} {fmt(f.get('evidence_rate')):>14} "
                  f"{fmt(r.get('accuracy')):>14} {fmt(f.get('accuracy')):>9} {fmt(r.get('mention_rate')):>18} "
                  f"{fmt(f.get('mention_rate')):>13}")
    worst = min((c["evidence_rate"] for c in result["cells"] if c["mode"] == "retrieval"), default=None)
    print(f"sweep {sweep_id} stored ({result['seconds']} s, window {result['window_tokens']} tokens); "
          f"lowest retrieval evidence rate over cells: {fmt(worst)}; see it on the page under Retrieval")
    return 0


def _policy_tokenizer(model: str):
    from transformers import AutoTokenizer


    return AutoTokenizer.from_pretrained(resolve_model(model))


def cmd_retrieval_index(args) -> int:
    # on first use: it pulls in numpy
    from retrieval.pipeline import Collection, RetrievalConfig, collection_path

    path = collection_path(args.name)  # checks the name before any work
    documents = {}
    names = [Path(f).name for f in args.files]
    for file, name in zip(args.files, names):
        p = Path(file)
        if p.is_dir():
            raise DocumentError(f"{file} is a directory; give paths of text files")
        if not p.is_file():
            raise DocumentError(f"{file}: no such file; give paths of text files")
        doc_id = name if names.count(name) == 1 else file  # two report.txt files keep their paths
        if doc_id in documents:
            raise DocumentError(f"{file} is given twice; give each file once")
        documents[doc_id] = read_document(p.read_bytes(), name=str(p))
    cfg = RetrievalConfig(chunk_tokens=args.chunk_tokens, overlap_tokens=args.overlap_tokens)
    size = sum(len(t) for t in documents.values())
    if size > 4 * 2**20:
        print(f"{size / 2**20:.0f} MiB of text: about {size / 4.2 / args.chunk_tokens:,.0f} chunks to embed at "
              "~25 chunks/s on a 2-core CPU; the progress bar follows", file=sys.stderr)
    col = Collection.open(args.name, documents, _policy_tokenizer(args.model), cfg)
    print(f"collection {args.name}: {len(documents)} document(s), {col.meta['chunks']} chunks embedded with "
          f"{col.meta['embedding_model']}, index {json.dumps(col.meta['index'])}; stored in {path}")
    return 0


def cmd_retrieval_search(args) -> int:
    # on first use: it pulls in numpy
    from retrieval.pipeline import Collection, Retriever, collection_path

    path = collection_path(args.name)
    if not (path / "meta.json").is_file():
        raise DocumentError(f"no collection {args.name!r}; build it with `rlwb retrieval index {args.name} FILE...`")
    col = Collection.load(path)
    chunked_with = col.meta.get("tokenizer", "")
    if args.model is None and not Path(chunked_with).is_dir():
        raise DocumentError(f"the tokenizer collection {args.name!r} was chunked with ({chunked_with or 'unknown'}) "
                            "is gone; pass --model with the policy model to count the budget in")
    tokenizer = _policy_tokenizer(args.model or chunked_with)
    ctx = Retriever(col).build_context(args.question, budget_tokens=args.budget, tokenizer=tokenizer)
    if args.json:
        print(json.dumps(ctx.record() | {"text": ctx.text}, indent=2))
        return 0
    for f in ctx.fragments:
        print(f"#{f['rank']:<2} {f['chunk_id']:<24} depth {f['depth']:.0%}  fine {f['fine']:.3f}  "
              f"dense {f['dense'] if f['dense'] is None else round(f['dense'], 3)}  {f['best_sentence'][:70]!r}")
    print(f"context: {ctx.tokens} of {ctx.budget_tokens} tokens, {len(ctx.fragments)} fragments ({ctx.dropped} "
          "did not fit); --json prints the context itself")
    return 0


def _token_count(text: str) -> int:
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kKmM]?)\s*", text)
    if not m:
        raise argparse.ArgumentTypeError(f"{text!r} is not a token count; write e.g. 4000, 4k or 1M")
    return int(float(m.group(1)) * {"": 1, "k": 1_000, "m": 1_000_000}[m.group(2).lower()])


def _int_list(parse):
    def parse_list(text: str) -> list[int]:
        items = [t for t in text.split(",") if t.strip()]
        if not items:
            raise argparse.ArgumentTypeError("give at least one value, comma-separated")
        return [parse(t) for t in items]

    return parse_list


def _depth(text: str) -> int:
    if not text.strip().isdigit() or int(text) > 100:
        raise argparse.ArgumentTypeError(f"{text!r} is not a depth; use whole percents 0..100, e.g. 0,50,100")
    return int(text)


def register_context_length(ev: argparse._SubParsersAction) -> None:
    """Add `context-length` to the `rlwb eval` sub-command parser `ev`."""
    cl = ev.add_parser("context-length", help="needle sweep over haystack lengths and depths, with and "
                       "without retrieval; stored for the Retrieval page's heat map")
    cl.add_argument("model", help="model name (e.g. smollm2-135m) or checkpoint directory")
    cl.add_argument("--lengths", type=_int_list(_token_count), default=[4_000, 16_000, 64_000, 256_000, 1_000_000],
                    help="haystack lengths in tokens, e.g. 4k,16k,64k,256k,1M (the default)")
    cl.add_argument("--depths", type=_int_list(_depth), default=list(range(0, 101, 10)),
                    help="needle depths in percent (default 0,10,...,100)")
    cl.add_argument("--haystacks", type=positive, default=10, help="haystacks per length, one needle per depth "
                    "in each (default 10)")
    cl.add_argument("--model-needles", type=int, default=1, help="haystacks per length whose needles the model "
                    "answers, in both modes (default 1)")
    cl.add_argument("--budget", type=positive, default=DEFAULT_BUDGET_TOKENS,
                    help="retrieval context budget in tokens")
    cl.add_argument("--window", type=positive, default=0, help="model context window in tokens (default: from its "
                    "config)")
    cl.add_argument("--engine", choices=ROLLOUT_ENGINES, default="vllm", help="rollout engine for the answers")
    cl.add_argument("--evidence-only", action="store_true", help="measure only whether the evidence reaches the "
                    "context; don't run the model")
    cl.set_defaults(fn=cmd_eval_context_length)


def register(sub: argparse._SubParsersAction) -> None:
    """Add `retrieval index` and `retrieval search` to the `rlwb` sub-command parser `sub`."""
    ret = sub.add_parser("retrieval", help="persisted document collections: index and search")
    rets = ret.add_subparsers(dest="retrieval_command", required=True)
    ri = rets.add_parser("index", help="chunk, embed and index text files into a named collection (reused "
                         "when the files and settings are unchanged)")
    ri.add_argument("name", help="collection name: letters, digits, '_', '.', '-'")
    ri.add_argument("files", nargs="+", help="text files (UTF-8 or another recognisable encoding)")
    ri.add_argument("--model", default="smollm2-135m", help="policy model whose tokenizer measures chunks")
    ri.add_argument("--chunk-tokens", type=positive, default=192, help="chunk length in tokens (default 192)")
    ri.add_argument("--overlap-tokens", type=int, default=24, help="overlap between chunks in tokens (default 24)")
    ri.set_defaults(fn=cmd_retrieval_index)
    rq = rets.add_parser("search", help="coarse search, fine ranking and the assembled context for a question")
    rq.add_argument("name")
    rq.add_argument("question")
    rq.add_argument("--model", default=None, help="policy model whose tokenizer counts the budget (default: the "
                    "one the collection was chunked with)")
    rq.add_argument("--budget", type=positive, default=DEFAULT_BUDGET_TOKENS, help="context budget in tokens")
    rq.add_argument("--json", action="store_true", help="print the context and its record as JSON")
    rq.set_defaults(fn=cmd_retrieval_search)
