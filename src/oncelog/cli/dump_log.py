"""`oncelog dump-log`: Kafka's kafka-dump-log.sh over oncelog's segment files (the same
format): each batch's offsets, producer id and epoch, sequences, transactional and control
flags, and the COMMIT/ABORT markers; records with ``--print-data-log``, or decoded as
internal-topic records with ``--offsets-decoder`` / ``--transaction-log-decoder`` (Kafka's
options; see internal_records). Offline: reads files, needs no broker."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from oncelog.cli.common import Output, emit, fail
from oncelog.cli.dump_index import INDEX_SUFFIXES, dump_index
from oncelog.cli.internal_records import describe_offsets_record, describe_txn_record
from oncelog.records.batch import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC_V2,
    BatchHeader,
    CorruptRecordError,
    InvalidRecordError,
    compute_crc,
    parse_header,
)
from oncelog.records.builder import decode_batch
from oncelog.records.control import parse_control_record
from oncelog.records.record import DecodedRecord

CODECS = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}

# Turns a record's (key, value) into the (key, payload) text printed for it.
Decoder = Callable[[bytes | None, bytes | None], tuple[str | None, str | None]]


def _text(data: bytes | None) -> str | None:
    return None if data is None else data.decode("utf-8", "replace")


def _plain(key: bytes | None, value: bytes | None) -> tuple[str | None, str | None]:
    return _text(key), _text(value)


def _record(h: BatchHeader, r: DecodedRecord, data: Decoder | None) -> dict[str, Any]:
    out: dict[str, Any] = {
        "offset": r.offset,
        "timestamp": r.timestamp,
        "key_size": -1 if r.key is None else len(r.key),
        "value_size": -1 if r.value is None else len(r.value),
        "sequence": -1 if h.base_sequence < 0 else h.base_sequence + r.offset - h.base_offset,
        "header_keys": [k for k, _ in r.headers],
    }
    if h.is_control:
        try:
            marker = parse_control_record(r.key, r.value)
            out["control_type"] = marker.type.name
            out["coordinator_epoch"] = marker.coordinator_epoch
        except InvalidRecordError as exc:
            out["control_type"] = f"invalid ({exc})"
    elif data is not None:
        out["key"], out["payload"] = data(r.key, r.value)
    return out


def scan(path: Path, data: Decoder | None, deep: bool = False) -> dict[str, Any]:
    """Every batch of one segment file; stops, saying why, at the first unreadable one.
    ``data``: how to print each record's key and payload (``None``: not at all); ``deep``:
    every record's metadata even without ``data`` (kafka-dump-log.sh --deep-iteration)."""
    buf = path.read_bytes()
    batches: list[dict[str, Any]] = []
    pos, stopped = 0, None
    while pos < len(buf):
        if len(buf) - pos < HEADER_SIZE:
            stopped = f"{len(buf) - pos} trailing bytes at position {pos}"
            break
        h = parse_header(buf, pos)
        if h.magic != MAGIC_V2 or h.batch_length < HEADER_SIZE - LOG_OVERHEAD:
            stopped = f"no record batch at position {pos} (magic {h.magic})"
            break
        if pos + h.size > len(buf):
            stopped = f"truncated batch at position {pos}"
            break
        batch: dict[str, Any] = {
            "base_offset": h.base_offset,
            "last_offset": h.last_offset,
            "count": h.records_count,
            "base_sequence": h.base_sequence,
            "last_sequence": h.last_sequence,
            "producer_id": h.producer_id,
            "producer_epoch": h.producer_epoch,
            "partition_leader_epoch": h.partition_leader_epoch,
            "is_transactional": h.is_transactional,
            "is_control": h.is_control,
            "position": pos,
            "timestamp_type": "LogAppendTime" if h.is_log_append_time else "CreateTime",
            "max_timestamp": h.max_timestamp,
            "size": h.size,
            "magic": h.magic,
            "compression": CODECS.get(h.compression, str(h.compression)),
            "crc": h.crc,
            "is_valid": compute_crc(buf, pos, h.size) == h.crc,
        }
        if h.is_control or data is not None or deep:
            try:
                _, records = decode_batch(buf, pos, verify=False)
                batch["records"] = [_record(h, r, data) for r in records]
            except (CorruptRecordError, InvalidRecordError, ValueError) as exc:
                batch["records_error"] = str(exc)
        batches.append(batch)
        pos += h.size
    return {"file": str(path), "batches": batches, "stopped": stopped}


def _files(paths: list[Path]) -> list[Path]:
    out: list[Path] = []
    for p in paths:
        if p.is_dir():
            out += sorted(p.glob("*.log"))
        elif p.is_file():
            out.append(p)
        else:
            fail(f"no such file or directory: {p}")
    return out


def _is_segment(path: Path) -> bool:
    # Kafka's DumpLogSegments goes by suffix; anything else that is not an index is
    # read as a segment here (a copied segment may have lost its name).
    return path.suffix not in INDEX_SUFFIXES


def _lines(dump: dict[str, Any]) -> list[str]:
    lines = [f"Dumping {dump['file']}"]
    for b in dump["batches"]:
        lines.append(
            f"baseOffset: {b['base_offset']} lastOffset: {b['last_offset']} count: {b['count']}"
            f" baseSequence: {b['base_sequence']} lastSequence: {b['last_sequence']}"
            f" producerId: {b['producer_id']} producerEpoch: {b['producer_epoch']}"
            f" partitionLeaderEpoch: {b['partition_leader_epoch']}"
            f" isTransactional: {str(b['is_transactional']).lower()}"
            f" isControl: {str(b['is_control']).lower()} position: {b['position']}"
            f" {b['timestamp_type']}: {b['max_timestamp']} size: {b['size']}"
            f" magic: {b['magic']} compresscodec: {b['compression']} crc: {b['crc']}"
            f" isvalid: {str(b['is_valid']).lower()}"
        )
        for r in b.get("records", []):
            line = (
                f"| offset: {r['offset']} {b['timestamp_type']}: {r['timestamp']}"
                f" keySize: {r['key_size']} valueSize: {r['value_size']}"
                f" sequence: {r['sequence']} headerKeys: [{','.join(r['header_keys'])}]"
            )
            if "control_type" in r:
                line += f" endTxnMarker: {r['control_type']}"
                if r.get("coordinator_epoch") is not None:
                    line += f" coordinatorEpoch: {r['coordinator_epoch']}"
            elif "payload" in r:
                line += f" key: {r['key']} payload: {r['payload']}"
            lines.append(line)
        if "records_error" in b:
            lines.append(f"| cannot decode records: {b['records_error']}")
    if dump["stopped"]:
        lines.append(f"stopped: {dump['stopped']}")
    return lines


def dump_log(
    files: Annotated[
        list[Path],
        typer.Argument(
            help="Segment files (*.log), their index files (*.index, *.timeindex, "
            "*.txnindex) or partition directories (their segments)."
        ),
    ],
    print_data_log: Annotated[
        bool, typer.Option("--print-data-log", help="Also print every record's key and payload.")
    ] = False,
    offsets_decoder: Annotated[
        bool,
        typer.Option(
            "--offsets-decoder",
            help="Decode records as __consumer_offsets keys and values (implies --print-data-log).",
        ),
    ] = False,
    transaction_log_decoder: Annotated[
        bool,
        typer.Option(
            "--transaction-log-decoder",
            help="Decode records as __transaction_state keys and values "
            "(implies --print-data-log).",
        ),
    ] = False,
    deep_iteration: Annotated[
        bool,
        typer.Option(
            "--deep-iteration",
            help="Every record's offset, timestamp, sizes, sequence and header keys, without "
            "its data (--print-data-log implies it).",
        ),
    ] = False,
    verify_index_only: Annotated[
        bool,
        typer.Option(
            "--verify-index-only",
            help="For .index and .timeindex files: check the entries against the segment "
            "and print only what does not match.",
        ),
    ] = False,
    output: Output = "table",
) -> None:
    """Dump log segments (batches, producer ids, epochs, sequences, transactional flags and
    control markers), and their .index, .timeindex and .txnindex files (entries checked
    against the segment, as kafka-dump-log.sh does)."""
    if offsets_decoder and transaction_log_decoder:
        fail("--offsets-decoder and --transaction-log-decoder exclude each other")
    decoder: Decoder | None = _plain if print_data_log else None
    if offsets_decoder:
        decoder = describe_offsets_record
    elif transaction_log_decoder:
        decoder = describe_txn_record
    dumps: list[dict[str, Any]] = []
    lines: list[str] = []
    problems: list[str] = []
    for path in _files(files):
        try:
            if _is_segment(path):
                dump = scan(path, decoder, deep_iteration)
                dumps.append(dump)
                lines += _lines(dump)
            else:
                index = dump_index(path, lambda log: scan(log, None)["batches"])
                dumps.append(index.as_json())
                lines += index.lines(verify_index_only)
                problems += index.problems
        except OSError as exc:
            fail(f"cannot read {path}: {exc.strerror}")
    if output == "json":
        emit(output, dumps, None)
    else:
        for line in lines:
            typer.echo(line)
    # Kafka prints what does not match on stderr once every file is dumped, and exits 0.
    for problem in problems:
        typer.echo(problem, err=True)
