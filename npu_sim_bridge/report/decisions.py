"""The report's per-node decisions, held as columns: one row per node, in the order recorded.

A large graph's report has a record for every node, and one object per record (with its fields and
its entry in a dict of records) was the largest single part of the pipeline's peak memory. Here a
row is an index into a few lists and arrays; the short, repeating values (op type, list colour, dtype
names, placement, GeOp name) are kept as small codes into a vocabulary per field (the two dtype
fields share one), a byte each while it fits.

`Decisions` is the mapping the report exposes as `report.nodes` (name -> NodeDecision). A
`NodeDecision` it hands out is a handle on a row: reading or setting a field reads or sets the
columns. One made on its own (`NodeDecision(name, op, ...)`) holds a one-row table of its own, and
storing it in a report moves its row there and points the handle at it.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from npu_sim_bridge.graph.name_index import new_index
from npu_sim_bridge.report.reasons import LazyReason, Reason, as_reason, reason as coded_reason

_NO_REASONS = ()
_CODED = ("list", "dtype_before", "dtype_after", "placement", "geop")
_ALL_CODED = ("op",) + _CODED
# The vocabulary each coded field takes its codes from: the two dtypes share one (rows compare them).
_VOCABULARY = {"op": "op", "list": "list", "dtype_before": "dtype", "dtype_after": "dtype",
               "placement": "placement", "geop": "geop"}
FIELDS = ("name", "op", "list", "dtype_before", "dtype_after", "placement", "geop", "reason", "reasons")


class InsertedText:
    """The reason of a node a pass inserted, made when read: code "<pass>.inserted", rendered "inserted
    by <pass>: <what> of <source>" (a pass inserting thousands of Casts keeps two references a node,
    not a sentence). A table keeps it as a code for (pass, what) and the source, not as this object;
    it is the row's text and its first reason."""

    __slots__ = ("by", "what", "source")

    def __init__(self, by: str, what: str, source):
        self.by, self.what, self.source = by, what, source

    def reason(self) -> Reason:
        return coded_reason(f"{self.by}.inserted", what=self.what, source=str(self.source))

    def __str__(self) -> str:
        return self.reason().text()


class Decisions(Mapping):
    """name -> NodeDecision, over columns (see the module docstring); rows are never removed."""

    def __init__(self):
        self._rows = new_index()  # name -> row; a row's name is `_rows.name(row)`
        # Per vocabulary (_VOCABULARY): code -> value, code 0 being None; and value -> code.
        self._vocab: dict[str, list[str | None]] = {name: [None] for name in set(_VOCABULARY.values())}
        self._codes: dict[str, dict[str, int]] = {name: {} for name in self._vocab}
        # One byte a code while the field's vocabulary fits (lists, dtypes and placements always do), two
        # or four beyond (a graph has a few hundred op types and a GeOp name per segment; see _code).
        self._coded = {field: array("B") for field in _VOCABULARY}
        # As passes gave them: none (the empty tuple), the one reason, a tuple of two or more, or a list
        # once the reasons were read (rendering replaces each with its Reason).
        self._reasons: list = []
        # Text set on a row, by row: (the text, how many of the row's first reasons it says already).
        # Few rows have one; the others' text is rendered from their reasons at each read (a text
        # and a count kept for every row were a twentieth of a rewrite's peak memory).
        self._texts: dict[int, tuple[str, int]] = {}
        # Per row: 0, or 1 + the index of the inserted node's source and (pass, what) code in the
        # two columns below (its InsertedText, taken apart: an object per Cast was a twentieth).
        self._inserted = array("I")
        self._inserted_sources: list = []
        self._inserted_codes = array("H")  # the index in `_inserted_kinds`
        self._inserted_kinds: list[tuple[str, str]] = []

    # ------------------------------------------------------------- mapping
    def __getitem__(self, name: str) -> "NodeDecision":
        return NodeDecision._at(self, self._rows[name])

    def get(self, name: str, default=None):
        row = self._rows.get(name)
        return default if row is None else NodeDecision._at(self, row)

    def __contains__(self, name: object) -> bool:
        return name in self._rows

    def __len__(self) -> int:
        return len(self._rows)

    def __iter__(self) -> Iterator[str]:
        return iter(self._rows)

    def values(self) -> list["NodeDecision"]:  # type: ignore[override]
        return [NodeDecision._at(self, row) for row in range(len(self._rows))]

    def items(self) -> list[tuple[str, "NodeDecision"]]:  # type: ignore[override]
        return list(zip(self._rows, self.values()))

    def __setitem__(self, name: str, decision: "NodeDecision") -> None:
        """Store a record made on its own under `name` (its row moves here; the handle follows it)."""
        if not isinstance(decision, NodeDecision):
            raise TypeError(f"report records are NodeDecision values, not {type(decision).__name__}")
        if decision.name != name:
            raise ValueError(f"the record for {name!r} is named {decision.name!r}")
        source, row = decision._table, decision._row
        if source is self:
            return
        fields = {field: source._value(field, row) for field in _CODED}
        new = self.add(name, source._value("op", row), **fields)
        self._reasons[new] = source._reasons[row]
        self._set_text(new, source._text(row), source._rendered(row))
        decision._table, decision._row = self, new

    # ----------------------------------------------------------- rows
    def add(self, name: str, op: str, list: str | None = None, dtype_before: str | None = None,  # noqa: A002
            dtype_after: str | None = None, placement: str | None = None, geop: str | None = None,
            text=None, reasons: "Reason | str | None" = None) -> int:
        """Append a row (or fill the row `name` has, anew); returns it. `text`: a str or an InsertedText
        standing for no reason values; `reasons`: one reason."""
        row = self._rows.get(name)
        if row is None:  # a new row (most calls: a pass inserting nodes, a body's records)
            row = self._rows.append(name)
            coded, code_of = self._coded, self._code
            for field, value in zip(_ALL_CODED, (op, list, dtype_before, dtype_after, placement, geop)):
                # the code first (a new one may widen the column), and None's code 0 without a call
                code = 0 if value is None else code_of(field, value)
                coded[field].append(code)
            self._reasons.append(_NO_REASONS if reasons is None else reasons)
            self._inserted.append(0)
            if text is not None:  # a new row has no text to clear
                self._set_text(row, text)
            return row
        self._coded["op"][row] = self._code("op", op)
        for field, value in zip(_CODED, (list, dtype_before, dtype_after, placement, geop)):
            self._coded[field][row] = self._code(field, value)
        self._reasons[row] = _NO_REASONS if reasons is None else reasons
        self._set_text(row, text)
        return row

    def decide(self, name: str, op: str, listed: bool, colour: str | None,
               dtypes: "tuple[str, str] | None", reason) -> None:
        """A pass's word on node `name` in one call, with no record handle made: a new row (op, list,
        dtypes, the reason) when the table has none, else the list set when `listed`, the dtypes when
        given, and the reason added when there is one."""
        row = self._rows.get(name)
        if row is None:
            before, after = dtypes if dtypes is not None else (None, None)
            self.add(name, op, colour, before, after, reasons=reason or None)
            return
        if listed:
            code = self._code("list", colour)  # first: a new code may widen the columns
            self._coded["list"][row] = code
        if dtypes is not None:
            before, after = self._code("dtype_before", dtypes[0]), self._code("dtype_after", dtypes[1])
            coded = self._coded
            coded["dtype_before"][row], coded["dtype_after"][row] = before, after
        if reason:
            self.add_reason(row, reason)

    def _set_text(self, row: int, text, rendered: int = 0) -> None:
        """Set a row's text: a str, None, or an InsertedText (kept as a code and its source); the
        text says the row's first `rendered` reasons already."""
        at = self._inserted[row]
        if at:  # (a row filled anew: its entry in the inserted columns goes)
            self._inserted[row], self._inserted_sources[at - 1] = 0, None
        if isinstance(text, InsertedText):
            kind = (text.by, text.what)
            if kind not in self._inserted_kinds:
                text.reason()  # once a kind: a pass with no "<pass>.inserted" code is refused here
                self._inserted_kinds.append(kind)
            self._inserted_sources.append(text.source)
            self._inserted_codes.append(self._inserted_kinds.index(kind))
            self._inserted[row] = len(self._inserted_sources)
            text = None
        if text is None and not rendered:
            self._texts.pop(row, None)
        else:
            self._texts[row] = (text, rendered)

    def _text(self, row: int):
        """A row's text as set: a str, None, or an InsertedText made again from its code."""
        at = self._inserted[row]
        if at:
            return InsertedText(*self._inserted_kinds[self._inserted_codes[at - 1]], self._inserted_sources[at - 1])
        held = self._texts.get(row)
        return None if held is None else held[0]

    def _rendered(self, row: int) -> int:
        """How many of the row's first reasons its text says already."""
        held = self._texts.get(row)
        return 0 if held is None else held[1]

    def mark(self, names: Iterable[str], op_of: Callable[[str], str], **values: str | None) -> None:
        """Set the coded fields `values` (e.g. placement="device") to the same value on the rows of
        `names`; a name with no row gets one first, in `names` order, of op `op_of(name)`. What a
        NodeDecision handle per name does, without one (a pass marks every node of a segment)."""
        rows = self._rows
        names = names if isinstance(names, list) else list(names)  # read twice below
        for name in names:
            if name not in rows:
                self.add(name, op_of(name))
        codes = [(field, self._code(field, value)) for field, value in values.items()]  # may widen
        get = rows.get
        for field, code in codes:
            column = self._coded[field]
            for name in names:
                column[get(name)] = code

    def extend(self, names: list[str], ops: list[str], dtypes: Iterable[str | None]) -> None:
        """Rows for nodes with no decision yet, their dtype unchanged (a graph's records as it came)."""
        try:
            self._rows.extend(names)
        except ValueError:
            raise ValueError("a report records each node once: the names repeat or are recorded already") from None
        op_codes = [self._code("op", op) for op in ops]  # first: a new code may widen the columns
        values = [self._code("dtype_before", dtype) for dtype in dtypes]
        coded = self._coded
        coded["op"].extend(array(coded["op"].typecode, op_codes))
        codes = array(coded["dtype_before"].typecode, values)
        coded["dtype_before"].extend(codes)
        coded["dtype_after"].extend(codes)
        for field in ("list", "placement", "geop"):
            coded[field].extend(array(coded[field].typecode, bytes(coded[field].itemsize * len(names))))
        self._reasons.extend([_NO_REASONS] * len(names))
        self._inserted.extend(array("I", bytes(4 * len(names))))

    def column(self, field: str) -> list:
        """One field of every row, in row order ("name", "op" or a coded field)."""
        if field == "name":
            return list(self._rows)
        vocab = self._vocab[_VOCABULARY[field]]
        return [vocab[code] for code in self._coded[field]]

    def count_differing(self, first: str, second: str) -> int:
        """How many rows hold different values in two coded fields."""
        return sum(a != b for a, b in zip(self._coded[first], self._coded[second]))

    def _code(self, field: str, value: str | None) -> int:
        """The code of `value` in `field`'s vocabulary (made on first use)."""
        if value is None:
            return 0
        name = _VOCABULARY[field]
        codes = self._codes[name]
        code = codes.get(value)
        if code is None:
            vocab = self._vocab[name]
            code = codes[value] = len(vocab)
            vocab.append(value)
            if code in (1 << 8, 1 << 16):  # past one byte, then two: the vocabulary's columns widen
                wider = "H" if code == 1 << 8 else "I"
                for other, used in _VOCABULARY.items():
                    if used == name:
                        self._coded[other] = array(wider, self._coded[other])
        return code

    def _value(self, field: str, row: int):
        return self._vocab[_VOCABULARY[field]][self._coded[field][row]]

    # -------------------------------------------------------- reasons
    def _count(self, row: int) -> int:
        held = self._reasons[row]
        return len(held) if isinstance(held, (list, tuple)) else 1

    def _list(self, row: int) -> list:
        held = self._reasons[row]
        if isinstance(held, list):
            return held
        if held is _NO_REASONS:
            held = []
        else:
            held = list(held) if held.__class__ is tuple else [held]
        self._reasons[row] = held
        return held

    def add_reason(self, row: int, reason: "Reason | str") -> None:
        held = self._reasons[row]
        if held is _NO_REASONS:
            self._reasons[row] = reason
        elif held.__class__ is list:
            held.append(reason)
        elif held.__class__ is tuple:
            self._reasons[row] = held + (reason,)
        else:  # two reasons as a tuple, not a list (its own items block besides): a twentieth of the peak
            self._reasons[row] = (held, reason)

    def reason(self, row: int) -> str:
        """The row's text: the text set on it, then its other reasons' (rendered at each read)."""
        text = self._text(row)
        if text is not None and not isinstance(text, str):
            text = str(text)
        start = self._rendered(row)
        if start < self._count(row):
            reasons = self._list(row)
            for index in range(start, len(reasons)):
                value = reasons[index]
                if not isinstance(value, Reason):
                    value = reasons[index] = self._as_reason(row, value)
                part = value.text()
                text = f"{text}; {part}" if text else part
        return text or ""

    def _as_reason(self, row: int, value) -> Reason:
        """A reason as a pass gave it, as a Reason (a LazyReason made for this row's node)."""
        return as_reason(value, self._rows.name(row) if isinstance(value, LazyReason) else "")

    def set_reason(self, row: int, text: str) -> None:
        """Set the row's text: it says the reasons the row has now (later ones follow it)."""
        self._set_text(row, text, self._count(row))

    def reasons(self, row: int) -> "list[Reason]":
        """The row's Reasons: an inserted node's first, then those passes gave (made at the first read)."""
        at = self._inserted[row]
        first = [] if not at else \
            [InsertedText(*self._inserted_kinds[self._inserted_codes[at - 1]], self._inserted_sources[at - 1]).reason()]
        if self._reasons[row] is _NO_REASONS:
            return first
        reasons = self._list(row)
        for index, value in enumerate(reasons):
            if not isinstance(value, Reason):
                reasons[index] = self._as_reason(row, value)
        return first + reasons if first else reasons


def _coded_property(field: str) -> property:
    def get(self):
        return self._table._value(field, self._row)

    def put(self, value):
        code = self._table._code(field, value)  # first: a new code may widen the column
        self._table._coded[field][self._row] = code

    return property(get, put, doc=f"The record's {field} (None when unset).")


class NodeDecision:
    """What the pipeline decided for one node of the input graph, and why: a handle on a row of a
    `Decisions` table.

    Passes add reasons as values; `reason`, the text people read, is rendered from them only when
    it is read (a report nobody reads or writes formats no sentence).
    """

    __slots__ = ("_table", "_row")
    _FIELDS = FIELDS

    def __init__(self, name: str, op: str, list: str | None = None, dtype_before: str | None = None,  # noqa: A002
                 dtype_after: str | None = None, placement: str | None = None, geop: str | None = None,
                 reason: str = "", reasons: "list[Reason | str] | None" = None):
        table = Decisions()
        held = None
        if reasons:
            held = reasons[0] if len(reasons) == 1 else [*reasons]
        self._table = table
        self._row = table.add(name, op, list, dtype_before, dtype_after, placement, geop, reasons=held)
        if reason:
            table.set_reason(self._row, reason)

    @classmethod
    def _at(cls, table: Decisions, row: int) -> "NodeDecision":
        handle = object.__new__(cls)
        handle._table, handle._row = table, row
        return handle

    list = _coded_property("list")                  # white | black | gray | None (not a float compute op)
    dtype_before = _coded_property("dtype_before")
    dtype_after = _coded_property("dtype_after")
    placement = _coded_property("placement")        # device | host
    geop = _coded_property("geop")                  # the GeOp call node that runs it

    @property
    def name(self) -> str:
        return self._table._rows.name(self._row)

    op = _coded_property("op")

    def add_reason(self, reason: "Reason | str") -> None:
        """Record why: a Reason, or text from passes that give text (kept as given until read)."""
        self._table.add_reason(self._row, reason)

    @property
    def reason(self) -> str:
        """The text of the reasons, for people ("; " between them)."""
        return self._table.reason(self._row)

    @reason.setter
    def reason(self, text: str) -> None:
        self._table.set_reason(self._row, text)

    @property
    def reasons(self) -> "list[Reason]":
        """The Reason values, in the order passes gave them (text a pass gave is a "text" Reason)."""
        return self._table.reasons(self._row)

    def host_reason(self) -> "Reason | None":
        """The first placement reason, if the node was kept on the host."""
        return next((r for r in self.reasons if r.is_host), None)

    def to_dict(self) -> dict[str, Any]:
        fields = {key: getattr(self, key) for key in FIELDS if key != "reasons"}
        fields["reasons"] = [r.to_dict() for r in self.reasons]
        return fields

    def __eq__(self, other) -> bool:
        if not isinstance(other, NodeDecision):
            return NotImplemented
        return self.to_dict() == other.to_dict()

    __hash__ = None  # mutable

    def __repr__(self) -> str:
        return "NodeDecision(" + ", ".join(f"{key}={getattr(self, key)!r}" for key in FIELDS) + ")"
