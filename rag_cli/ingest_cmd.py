"""``rag ingest``, ``rag collections`` and ``rag inspect``."""

from __future__ import annotations

import argparse
import difflib
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from ingest.extract import KINDS, ExtractOptions
from ingest.partition import SPLITTERS, PartitionOptions
from ingest.pipeline import Batching, IngestError, IngestOptions, Ingestor, IngestReport
from ingest.watch import watch
from rag_cli.services import services_of
from tools.config import Settings
from tools.store import STORAGE_FAILED
from tools.store.collection import Collection, drop_collection, exclusive, list_collections

T = TypeVar("T")


def register(sub: argparse._SubParsersAction) -> list[argparse.ArgumentParser]:
    ingest = sub.add_parser("ingest", help="add files or folders to a collection (incremental)")
    ingest.add_argument("paths", nargs="+", metavar="PATH")
    ingest.add_argument("--collection", help="collection name (default: settings.collection)")
    ingest.add_argument("--include", action="append", default=[], metavar="GLOB")
    ingest.add_argument("--exclude", action="append", default=[], metavar="GLOB")
    ingest.add_argument("--splitter", choices=SPLITTERS)
    ingest.add_argument(
        "--splitter-for",
        action="append",
        default=[],
        metavar="KIND=SPLITTER",
        help="per file type, e.g. --splitter-for pdf=lines",
    )
    ingest.add_argument("--chunk-size", type=int)
    ingest.add_argument("--overlap", type=int)
    ingest.add_argument(
        "--commit-chunks",
        type=int,
        metavar="N",
        help=f"commit files in groups of about N chunks (default {Batching().group_chunks}): "
        "smaller loses less work to an interruption, larger embeds in bigger batches",
    )
    ingest.add_argument("--json-text-field", default="text")
    ingest.add_argument("--json-id-field", default="id")
    ingest.add_argument(
        "--derive",
        action="store_true",
        help="also index LLM summaries/QA pairs and per-field table rows",
    )
    ingest.add_argument(
        "--prune", action="store_true", help="remove files under PATH that no longer exist"
    )
    ingest.add_argument("--strict", action="store_true", help="stop at the first unreadable file")
    ingest.add_argument(
        "--rebuild",
        action="store_true",
        help="delete the collection first and ingest PATH from scratch (repairs a damaged one)",
    )
    ingest.add_argument(
        "--watch",
        action="store_true",
        help="after ingesting, re-ingest whenever files under PATH change (implies --prune; "
        "Ctrl-C stops)",
    )
    ingest.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    ingest.set_defaults(run=run_ingest)

    collections = sub.add_parser(
        "collections",
        help="list collections with counts and settings; their versions (history, diff)",
    )
    collections.add_argument("--json", action="store_true")
    collections.set_defaults(run=run_collections)
    versions = collections.add_subparsers(dest="collections_command", metavar="COMMAND")

    def version_command(name: str, help: str, run: Callable[..., int]) -> argparse.ArgumentParser:
        command = versions.add_parser(name, help=help)
        command.add_argument("name", metavar="NAME")
        command.add_argument("--json", action="store_true")
        command.set_defaults(run=run)
        return command

    history = version_command("history", "every version of a collection: one per run", run_history)
    diff = version_command("diff", "files added, changed and removed between versions", run_diff)
    diff.add_argument("old", type=int, metavar="V1")
    diff.add_argument("new", type=int, metavar="V2")
    rollback = version_command(
        "rollback", "answer as version V did (a new version; nothing is re-embedded)", run_rollback
    )
    rollback.add_argument("version", type=int, metavar="V")
    gc = version_command(
        "gc", "reclaim the space of old versions, keeping rollback to the last N", run_gc
    )
    gc.add_argument("--keep", type=int, required=True, metavar="N")

    inspect = sub.add_parser("inspect", help="show how a source was chunked")
    inspect.add_argument("source", help="source name as listed in the collection")
    inspect.add_argument("--collection")
    inspect.set_defaults(run=run_inspect)
    return [ingest, collections, history, diff, rollback, gc, inspect]


def _options(args: argparse.Namespace, settings: Settings) -> IngestOptions:
    per_kind = {}
    for item in args.splitter_for:
        kind, sep, splitter = (part.strip() for part in item.partition("="))
        if not sep or kind not in KINDS or splitter not in SPLITTERS:
            raise IngestError(
                f"--splitter-for expects KIND=SPLITTER, got {item!r}; KIND is one of "
                f"{', '.join(KINDS)} and SPLITTER one of {', '.join(SPLITTERS)}"
            )
        per_kind[kind] = splitter
    size = settings.chunk_size if args.chunk_size is None else args.chunk_size
    overlap = settings.chunk_overlap if args.overlap is None else args.overlap
    try:
        partition = PartitionOptions(args.splitter or settings.splitter, size, overlap, per_kind)
    except ValueError as exc:
        raise IngestError(str(exc)) from None
    return IngestOptions(
        include=tuple(args.include),
        exclude=tuple(args.exclude),
        partition=partition,
        extract=ExtractOptions(
            max_file_bytes=settings.max_file_bytes,
            json_text_field=args.json_text_field,
            json_id_field=args.json_id_field,
        ),
        derive=args.derive,
        prune=args.prune or args.watch,
        strict=args.strict,
        batching=Batching(group_chunks=args.commit_chunks or Batching().group_chunks),
    )


def _print_report(report: IngestReport) -> None:
    r = report
    print(
        f"collection {r.collection}: {r.files_seen} files seen, {r.files_indexed} indexed, "
        f"{r.files_unchanged} unchanged, {len(r.skipped)} skipped, {r.files_removed} removed"
        + (f", {r.files_by_other_workers} by other workers" if r.files_by_other_workers else "")
    )
    print(
        f"chunks: {r.chunks_added} added, {r.chunks_deleted} deleted "
        f"({r.chunks_embedded} embedded, {r.vectors_reused} vectors reused)"
    )
    print(f"time: {r.seconds:.2f}s ({r.chunks_per_s:.1f} chunks/s)")
    for item in r.skipped:
        print(f"skipped {item['path']}: {item['reason']}")
    for warning in r.warnings:
        print(f"warning: {warning}")
    if r.orphans_removed:
        print(f"cleaned up {r.orphans_removed} vectors left by an interrupted run")


def _watch(args: argparse.Namespace, ingestor: Ingestor) -> None:
    """One line per run of changes, until Ctrl-C."""
    ingestor.progress = False
    paths = ", ".join(args.paths)
    print(f"watching {paths} for changes (Ctrl-C stops)", flush=True)

    def report(changed: set[str], result: IngestReport | Exception) -> None:
        stamp = time.strftime("%H:%M:%S")
        if isinstance(result, Exception):
            print(f"{stamp} {len(changed)} changes: run failed: {result}", flush=True)
            return
        r = result
        print(
            f"{stamp} {len(changed)} changes: {r.files_indexed} files indexed, "
            f"{r.files_removed} removed, {r.chunks_added} chunks added, {r.chunks_deleted} "
            f"deleted, {len(r.skipped)} skipped ({r.seconds:.1f}s)",
            flush=True,
        )

    try:
        watch(args.paths, lambda: ingestor.run(args.paths), report)
    except KeyboardInterrupt:
        print("stopped watching", flush=True)


def _forget_if_empty(settings: Settings, collection: Collection, new: bool) -> None:
    """A first ingestion that stored no chunk (every file skipped, a model that failed,
    Ctrl-C before the first commit) leaves no empty collection behind."""
    if new and not collection.manifest.chunk_count():
        collection.close()
        drop_collection(settings, collection.name)


def run_ingest(args: argparse.Namespace, settings: Settings) -> int:
    try:
        options = _options(args, settings)
        missing = [p for p in args.paths if not Path(p).exists()]
        if missing:  # checked before the collection is created, so a typo creates nothing
            raise FileNotFoundError(f"no such file or directory: {', '.join(missing)}")
        name = args.collection or settings.collection
        if args.rebuild:
            drop_collection(settings, name)
        new = name not in list_collections(settings)
        collection = Collection(settings, args.collection, create=True)
        try:
            services = services_of(args)
            ingestor = Ingestor(
                settings,
                collection,
                services.document_embedder(settings),
                options,
                progress=not args.json,
                llm_factory=lambda: services.llm(settings, "generator"),
            )
            report = ingestor.run(args.paths)
            if args.watch:
                _print_report(report)
                _watch(args, ingestor)
                return 0
        except STORAGE_FAILED:
            raise  # the store may not be writable now: the user's re-run finishes the job
        except BaseException:  # a model fault, too many records, Ctrl-C...
            _forget_if_empty(settings, collection, new)
            raise
        else:
            _forget_if_empty(settings, collection, new)
        finally:
            collection.close()
    except (IngestError, FileNotFoundError) as exc:
        print(f"rag ingest: error: {exc}", file=sys.stderr)
        return 1
    except STORAGE_FAILED as exc:  # a full disk, a read-only data directory...
        print(
            f"rag ingest: error: storage failed: {exc}. Files committed before it are kept and "
            "the rest is as before; free space or fix the data directory, then re-run",
            file=sys.stderr,
        )
        return 1
    if args.json:
        print(json.dumps(report.as_dict(), indent=2))
    else:
        _print_report(report)
    return 0


def _stamp(seconds: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(seconds)) if seconds else "-"


def run_history(args: argparse.Namespace, settings: Settings) -> int:
    collection = Collection(settings, args.name)
    try:
        rows = collection.manifest.versions()
    finally:
        collection.close()
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    if not rows:
        print(f"{args.name}: no recorded versions (ingested before versions were kept)")
    for row in rows:
        state = "" if row["finished_at"] else " (interrupted: only these files committed)"
        state += f" ({row['note']})" if row["note"] else ""
        print(
            f"v{row['version']}  {_stamp(row['started_at'])}  {row['added']} added, "
            f"{row['changed']} changed, {row['removed']} removed{state}"
        )
    return 0


def run_diff(args: argparse.Namespace, settings: Settings) -> int:
    collection = Collection(settings, args.name)
    try:
        known = {row["version"] for row in collection.manifest.versions()}
        unknown = [v for v in (args.old, args.new) if v not in known]
        if unknown:
            listed = ", ".join(f"v{v}" for v in sorted(known)) or "none"
            raise ValueError(f"{args.name} has no version {unknown[0]} (versions: {listed})")
        old, new = collection.manifest.files_at(args.old), collection.manifest.files_at(args.new)
    finally:
        collection.close()
    changes = {
        "added": {f: new[f][1] for f in sorted(set(new) - set(old))},
        "removed": {f: old[f][1] for f in sorted(set(old) - set(new))},
        "changed": {
            f: [old[f][1], new[f][1]] for f in sorted(set(old) & set(new)) if old[f] != new[f]
        },
        "files": [len(old), len(new)],
        "chunks": [sum(c for _, c in old.values()), sum(c for _, c in new.values())],
    }
    if args.json:
        print(json.dumps(changes, indent=2))
        return 0
    print(
        f"{args.name} v{args.old} -> v{args.new}: files {changes['files'][0]} -> "
        f"{changes['files'][1]}, chunks {changes['chunks'][0]} -> {changes['chunks'][1]}"
    )
    for f, chunks in changes["added"].items():
        print(f"  + {f} ({chunks} chunks)")
    for f, (before, after) in changes["changed"].items():
        print(f"  ~ {f} ({before} -> {after} chunks)")
    for f, chunks in changes["removed"].items():
        print(f"  - {f} ({chunks} chunks)")
    return 0


def _as_writer(settings: Settings, name: str, change: Callable[[Collection], T]) -> T:
    """Run ``change`` on the collection under its writer lock (no ingestion meanwhile)."""
    with exclusive(settings, name):
        collection = Collection(settings, name)
        try:
            return change(collection)
        finally:
            collection.close()


def run_rollback(args: argparse.Namespace, settings: Settings) -> int:
    new, restored = _as_writer(settings, args.name, lambda c: c.rollback(args.version))
    if args.json:
        print(json.dumps({"version": new, "rolled_back_to": args.version, "chunks": restored}))
    elif new is None:
        print(f"{args.name} already holds what v{args.version} held; nothing changed")
    else:
        print(
            f"{args.name} v{new}: rolled back to v{args.version} ({restored} chunks restored, "
            "none re-embedded). The next `rag ingest` of the folder brings changed files "
            "back; `rag collections rollback` to the version before undoes this."
        )
    return 0


def run_gc(args: argparse.Namespace, settings: Settings) -> int:
    if args.keep < 1:
        raise ValueError("--keep must be at least 1 (the current version)")
    freed = _as_writer(settings, args.name, lambda c: c.gc(args.keep))
    if args.json:
        print(json.dumps(freed))
    else:
        print(
            f"{args.name}: {freed['retired_chunks_deleted']} kept chunks and "
            f"{freed['vectors_deleted']} vectors deleted, "
            f"{freed['manifest_bytes_freed'] / 1e6:.1f} MB of manifest freed; rollback now "
            f"reaches back to v{freed['restorable_from']}"
        )
    return 0


def run_collections(args: argparse.Namespace, settings: Settings) -> int:
    rows = []
    for name in list_collections(settings):
        col = Collection(settings, name)
        rows.append(col.stats())
        col.close()
    if args.json:
        print(json.dumps(rows, indent=2))
    elif not rows:
        print(f"no collections in {settings.data_dir}; create one with `rag ingest PATH`")
    for row in [] if args.json else rows:
        print(
            f"{row['name']}: {row['files']} files, {row['documents']} documents, "
            f"{row['chunks']} chunks, embedded with {row.get('embedding_model', '?')}"
        )
    return 0


def _unknown_source(collection: Collection, source: str) -> str:
    """Why ``source`` has no chunks, with the names the user probably meant."""
    sources = collection.manifest.sources()
    inside = [s for s in sources if s.startswith(source + "#")]  # a JSON/JSONL file's records
    if inside:
        shown = ", ".join(inside[:5]) + (f" ... ({len(inside)} records)" if len(inside) > 5 else "")
        return f"{source!r} holds one document per record; inspect one of: {shown}"
    close = difflib.get_close_matches(source, sources, n=5, cutoff=0.5)
    hint = f"; did you mean {', '.join(close)}?" if close else " (`rag collections` lists counts)"
    return f"no chunks for {source!r} in collection {collection.name!r}{hint}"


def run_inspect(args: argparse.Namespace, settings: Settings) -> int:
    collection = Collection(settings, args.collection)
    try:
        chunks = collection.manifest.chunks_of_source(args.source)
        if not chunks:
            print(f"rag inspect: {_unknown_source(collection, args.source)}", file=sys.stderr)
            return 1
    finally:
        collection.close()
    print(f"{args.source}: {len(chunks)} chunks")
    for c in chunks:
        where = [f"[{c.kind} {c.chunk_index + 1}/{c.chunk_count}]"]
        where += [f"page {c.page}"] if c.page else []
        where += [f"lines {c.start_line}-{c.end_line}"] if c.start_line else []
        where += [f"chars {c.start_char}-{c.end_char}"]
        where += [f"heading {c.heading!r}"] if c.heading else []
        where += [f"embedded as {c.embed_text[:60]!r}"] if c.embed_text else []
        print(" ".join(where))
        print("    " + c.text[:160].replace("\n", " ") + ("..." if len(c.text) > 160 else ""))
    return 0
