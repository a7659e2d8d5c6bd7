"""Chakra execution-trace (ET) schema, declared in netsim's own code.

The Chakra ET format (mlcommons/chakra, proto3, package ``ChakraProtoMsg``) is
described field by field in ``reference.md`` §3.  Chakra is not on PyPI, so
instead of shipping generated code we describe the messages with a
:class:`~google.protobuf.descriptor_pb2.FileDescriptorProto`, load it into a
private :class:`~google.protobuf.descriptor_pool.DescriptorPool` and ask
:func:`~google.protobuf.message_factory.GetMessageClass` for the classes.  The
classes serialize byte-identically to protoc-generated ones.

The module also holds the attribute rules shared by the reader and the
writer: :func:`normalize_attr` / :func:`normalize_attrs` (reference §3.4) and
:func:`write_attr` (the member types ASTRA-sim expects).

Examples
--------
>>> classes = chakra_classes()
>>> node = classes.Node(id=3, name="ar", type=NodeType.COMM_COLL_NODE)
>>> classes.Node.FromString(node.SerializeToString()).name
'ar'
>>> CommType.ALL_GATHER.value
2
"""

from __future__ import annotations

import enum
import functools
from dataclasses import dataclass
from collections.abc import Iterable
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from netsim.vocab import OP_KINDS, CommType, NodeType  # the Chakra codes live in the leaf module; re-exported here

__all__ = [
    "ATTR_SCALAR_TYPES",
    "NORMALIZED_ATTRS",
    "AttrTypeError",
    "PACKAGE",
    "ChakraClasses",
    "CommType",
    "NodeType",
    "INT_MEMBERS",
    "attr_member_names",
    "attr_to_python",
    "WRITE_MEMBERS",
    "chakra_classes",
    "combine_attrs",
    "normalize_attr",
    "normalize_attrs",
    "python_to_attr",
    "write_attr",
]

PACKAGE = "ChakraProtoMsg"

_F = descriptor_pb2.FieldDescriptorProto


# (scalar type name, FieldDescriptorProto type).  The order fixes the field
# numbers of AttributeProto's oneof: ``<name>_val`` = 3+2k, ``<name>_list`` = 4+2k.
ATTR_SCALAR_TYPES: tuple[tuple[str, int], ...] = (
    ("double", _F.TYPE_DOUBLE),
    ("float", _F.TYPE_FLOAT),
    ("int32", _F.TYPE_INT32),
    ("int64", _F.TYPE_INT64),
    ("uint32", _F.TYPE_UINT32),
    ("uint64", _F.TYPE_UINT64),
    ("sint32", _F.TYPE_SINT32),
    ("sint64", _F.TYPE_SINT64),
    ("fixed32", _F.TYPE_FIXED32),
    ("fixed64", _F.TYPE_FIXED64),
    ("sfixed32", _F.TYPE_SFIXED32),
    ("sfixed64", _F.TYPE_SFIXED64),
    ("bool", _F.TYPE_BOOL),
    ("string", _F.TYPE_STRING),
    ("bytes", _F.TYPE_BYTES),
)


#: Oneof members that hold one integer (any width or encoding).
INT_MEMBERS: frozenset[str] = frozenset(
    f"{s}_val" for s in ("int32", "int64", "uint32", "uint64", "sint32", "sint64",
                         "fixed32", "fixed64", "sfixed32", "sfixed64")
)

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def _list_message_name(scalar: str) -> str:
    """Return the list-message name for a scalar type, e.g. ``uint64`` → ``Uint64List``."""
    return scalar[0].upper() + scalar[1:] + "List"


def attr_member_names() -> tuple[str, ...]:
    """Names of AttributeProto's 30 oneof members, in field-number order (3..32).

    Examples
    --------
    >>> names = attr_member_names()
    >>> len(names), names[0], names[-1]
    (30, 'double_val', 'bytes_list')
    """
    out: list[str] = []
    for scalar, _ in ATTR_SCALAR_TYPES:
        out += [f"{scalar}_val", f"{scalar}_list"]
    return tuple(out)


def _field(msg: Any, name: str, number: int, ftype: int, *, repeated: bool = False,
           type_name: str | None = None) -> Any:
    """Append one field to a DescriptorProto and return it."""
    fld = msg.field.add(name=name, number=number, type=ftype)
    fld.label = _F.LABEL_REPEATED if repeated else _F.LABEL_OPTIONAL
    if type_name is not None:
        fld.type_name = type_name
    return fld


def _add_enum(fdp: descriptor_pb2.FileDescriptorProto, name: str, members: type[enum.IntEnum]) -> None:
    """Declare a proto enum from a Python IntEnum (single source of truth)."""
    edp = fdp.enum_type.add(name=name)
    for member in members:
        edp.value.add(name=member.name, number=int(member))


def _add_attribute_proto(fdp: descriptor_pb2.FileDescriptorProto) -> None:
    """Declare AttributeProto (name, doc_string, 30-member oneof) and the 15 list messages."""
    attr = fdp.message_type.add(name="AttributeProto")
    _field(attr, "name", 1, _F.TYPE_STRING)
    _field(attr, "doc_string", 2, _F.TYPE_STRING)
    attr.oneof_decl.add(name="value")
    for k, (scalar, ftype) in enumerate(ATTR_SCALAR_TYPES):
        list_name = _list_message_name(scalar)
        # proto3 packs repeated numeric scalars by default; strings/bytes are never packed.
        lst = fdp.message_type.add(name=list_name)
        _field(lst, "values", 1, ftype, repeated=True)
        _field(attr, f"{scalar}_val", 3 + 2 * k, ftype).oneof_index = 0
        _field(attr, f"{scalar}_list", 4 + 2 * k, _F.TYPE_MESSAGE,
               type_name=f".{PACKAGE}.{list_name}").oneof_index = 0


def _add_node_fields(msg: Any, package: str) -> None:
    """Declare Node's fields 1..10 on ``msg``."""
    _field(msg, "id", 1, _F.TYPE_UINT64)
    _field(msg, "name", 2, _F.TYPE_STRING)
    _field(msg, "type", 3, _F.TYPE_ENUM, type_name=f".{package}.NodeType")
    _field(msg, "ctrl_deps", 4, _F.TYPE_UINT64, repeated=True)
    _field(msg, "data_deps", 5, _F.TYPE_UINT64, repeated=True)
    _field(msg, "start_time_micros", 6, _F.TYPE_UINT64)
    _field(msg, "duration_micros", 7, _F.TYPE_UINT64)
    _field(msg, "inputs", 8, _F.TYPE_MESSAGE, type_name=f".{package}.IOInfo")
    _field(msg, "outputs", 9, _F.TYPE_MESSAGE, type_name=f".{package}.IOInfo")
    _field(msg, "attr", 10, _F.TYPE_MESSAGE, repeated=True, type_name=f".{package}.AttributeProto")


def _public_file() -> descriptor_pb2.FileDescriptorProto:
    """Build the FileDescriptorProto of the public Chakra schema."""
    fdp = descriptor_pb2.FileDescriptorProto(name="netsim/chakra_et.proto", package=PACKAGE, syntax="proto3")
    _add_attribute_proto(fdp)
    meta = fdp.message_type.add(name="GlobalMetadata")
    _field(meta, "version", 1, _F.TYPE_STRING)
    _field(meta, "attr", 2, _F.TYPE_MESSAGE, repeated=True, type_name=f".{PACKAGE}.AttributeProto")
    _add_enum(fdp, "NodeType", NodeType)
    _add_enum(fdp, "CollectiveCommType", CommType)
    _add_node_fields(fdp.message_type.add(name="Node"), PACKAGE)
    io = fdp.message_type.add(name="IOInfo")
    for number, name in enumerate(("values", "shapes", "types"), start=1):
        _field(io, name, number, _F.TYPE_STRING)
    tensor = fdp.message_type.add(name="Tensor")
    for number, name in enumerate(("tensor_id", "storage_id", "offset", "num_elem", "elem_bytes"), start=1):
        _field(tensor, name, number, _F.TYPE_UINT64)
    _field(tensor, "device", 6, _F.TYPE_STRING)
    return fdp


@dataclass(frozen=True, slots=True)
class ChakraClasses:
    """The message classes of the Chakra schema (built once per process)."""

    GlobalMetadata: Any
    Node: Any
    AttributeProto: Any
    IOInfo: Any
    Tensor: Any
    lists: dict[str, Any]
    """List message classes keyed by scalar type name (``"bool"`` → ``BoolList``)."""


@functools.cache
def chakra_classes() -> ChakraClasses:
    """Build (once) and return the Chakra message classes.

    Returns
    -------
    ChakraClasses
        Message classes from a private descriptor pool.

    Examples
    --------
    >>> c = chakra_classes()
    >>> c.Node.DESCRIPTOR.full_name
    'ChakraProtoMsg.Node'
    >>> c.AttributeProto.DESCRIPTOR.fields_by_name["bool_val"].number
    27
    """
    pool = descriptor_pool.DescriptorPool()
    public = _public_file()
    pool.Add(public)

    def get(full_name: str) -> Any:
        return message_factory.GetMessageClass(pool.FindMessageTypeByName(full_name))

    return ChakraClasses(
        GlobalMetadata=get(f"{PACKAGE}.GlobalMetadata"),
        Node=get(f"{PACKAGE}.Node"),
        AttributeProto=get(f"{PACKAGE}.AttributeProto"),
        IOInfo=get(f"{PACKAGE}.IOInfo"),
        Tensor=get(f"{PACKAGE}.Tensor"),
        lists={s: get(f"{PACKAGE}.{_list_message_name(s)}") for s, _ in ATTR_SCALAR_TYPES},
    )


def attr_to_python(attr: Any) -> Any:
    """Return the Python value of an AttributeProto (``None`` if no member is set).

    Lists come back as Python lists; the member type is not kept.

    Examples
    --------
    >>> A = chakra_classes().AttributeProto
    >>> attr_to_python(A(name="x", int32_val=-4)), attr_to_python(A(name="y"))
    (-4, None)
    >>> attr_to_python(python_to_attr("dims", [True, False]))
    [True, False]
    """
    member = attr.WhichOneof("value")
    if member is None:
        return None
    value = getattr(attr, member)
    return list(value.values) if member.endswith("_list") else value


def _list_member(name: str, values: list[Any]) -> str:
    """Pick the list member for a homogeneous Python list."""
    kinds = {type(v) for v in values}
    for scalar, pytypes in (("bool", {bool}), ("int64", {int}), ("double", {float, int}),
                            ("string", {str}), ("bytes", {bytes})):
        if kinds <= pytypes:
            if scalar == "int64" and not all(_INT64_MIN <= v <= _INT64_MAX for v in values):
                return "uint64_list"
            return f"{scalar}_list"
    raise TypeError(f"attribute {name!r}: cannot store a list of {sorted(k.__name__ for k in kinds)}")


def python_to_attr(name: str, value: Any) -> Any:
    """Build an AttributeProto named ``name`` from a Python value.

    ``bool`` → ``bool_val``, ``int`` → ``int64_val`` (``uint64_val`` above the
    int64 range), ``float`` → ``double_val``, ``str`` → ``string_val``,
    ``bytes`` → ``bytes_val``; lists and tuples map to the matching ``*_list``.
    An AttributeProto passed as ``value`` is copied (keeps its member type).

    Examples
    --------
    >>> python_to_attr("comm_size", 1 << 20).WhichOneof("value")
    'int64_val'
    >>> python_to_attr("rf_id", 2**64 - 1).WhichOneof("value")
    'uint64_val'
    """
    classes = chakra_classes()
    attr = classes.AttributeProto(name=name)
    if isinstance(value, classes.AttributeProto):
        attr.CopyFrom(value)
        attr.name = name
    elif isinstance(value, bool):
        attr.bool_val = value
    elif isinstance(value, int):
        if _INT64_MIN <= value <= _INT64_MAX:
            attr.int64_val = value
        else:
            attr.uint64_val = value
    elif isinstance(value, float):
        attr.double_val = value
    elif isinstance(value, str):
        attr.string_val = value
    elif isinstance(value, bytes):
        attr.bytes_val = value
    elif isinstance(value, (list, tuple)):
        member = _list_member(name, list(value))
        getattr(attr, member).SetInParent()  # an empty list is still a set member
        getattr(attr, member).values.extend(value)
    else:
        raise TypeError(f"attribute {name!r}: cannot store a {type(value).__name__}")
    return attr


# --------------------------------------------------------------------------
# Attribute normalisation (reference.md §3.4)
# --------------------------------------------------------------------------

#: Normalised attributes, in the order of :class:`netsim.chakra.EtNode`'s fields.
NORMALIZED_ATTRS: tuple[str, ...] = (
    "comm_type", "comm_size", "comm_src", "comm_dst", "comm_tag", "comm_priority",
    "pg_name", "is_cpu_op", "num_ops", "tensor_size", "involved_dim", "op_kind", "gemm_m", "gemm_n",
)
_INT_ATTRS = frozenset(NORMALIZED_ATTRS) - {"pg_name", "is_cpu_op", "involved_dim", "op_kind"}
_INT_LISTS = frozenset(m[:-4] + "_list" for m in INT_MEMBERS)


class AttrTypeError(ValueError):
    """An attribute holds a oneof member netsim cannot read for it (no file context yet)."""

    def __init__(self, name: str, member: str | None, expected: str):
        self.name = name
        super().__init__(f"attribute {name!r} holds {member or 'no value'}; expected {expected}")


def normalize_attr(attr: Any) -> tuple[str, Any]:
    """Return ``(name, value)``: normalised for known attributes, plain Python otherwise.

    Known attributes (:data:`NORMALIZED_ATTRS`) accept any integer member for
    integers, bool or integer for ``is_cpu_op``, string or integer for
    ``pg_name`` (kept a string) and a bool or integer list for
    ``involved_dim``; another member raises :class:`AttrTypeError`.  An
    attribute with no member set reads as ``None``.

    Examples
    --------
    >>> A = chakra_classes().AttributeProto
    >>> normalize_attr(A(name="pg_name", int32_val=5)), normalize_attr(A(name="rf_id", uint64_val=3))
    (('pg_name', '5'), ('rf_id', 3))
    """
    name = attr.name
    if name not in _KNOWN_SET:
        return name, attr_to_python(attr)
    member = attr.WhichOneof("value")
    if member is None:
        return name, None
    value = getattr(attr, member)
    if name in _INT_ATTRS:
        if member not in INT_MEMBERS:
            raise AttrTypeError(name, member, "an integer member such as int64_val")
        if not _INT64_MIN < value <= _INT64_MAX:
            raise AttrTypeError(name, f"{member} {value}", "a value that fits in int64")
        return name, value
    if name == "is_cpu_op":
        if member != "bool_val" and member not in INT_MEMBERS:
            raise AttrTypeError(name, member, "bool_val or an integer member")
        return name, bool(value)
    if name == "pg_name":
        if member != "string_val" and member not in INT_MEMBERS:
            raise AttrTypeError(name, member, "string_val or an integer member")
        return name, value if member == "string_val" else str(value)
    if name == "op_kind":  # netsim's own attribute: the kernel kind of a compute node (netsim.vocab.OP_KINDS)
        if member != "string_val" or value not in OP_KINDS:
            raise AttrTypeError(name, f"{member} {value!r}", f"string_val, one of {', '.join(OP_KINDS)}")
        return name, value
    if member != "bool_list" and member not in _INT_LISTS:  # involved_dim
        raise AttrTypeError(name, member, "bool_list")
    return name, tuple(bool(v) for v in value.values)


def combine_attrs(pairs: Iterable[tuple[str, Any]], with_other: bool) -> tuple[Any, ...]:
    """Fold ``(name, value)`` pairs into the normalised tuple (the first of a repeated name wins).

    Returns the values of :data:`NORMALIZED_ATTRS` (``None`` when absent), then
    ``other``: a dict of the remaining attributes, or ``None`` unless ``with_other``.

    Examples
    --------
    >>> t = combine_attrs([("comm_size", 8), ("x", 1), ("comm_size", 9)], True)
    >>> t[NORMALIZED_ATTRS.index("comm_size")], t[-1]
    (8, {'x': 1})
    """
    values: list[Any] = [None] * len(NORMALIZED_ATTRS)
    seen = 0  # bit i set once NORMALIZED_ATTRS[i] was found
    other: dict[str, Any] | None = {} if with_other else None
    for name, value in pairs:
        i = _POSITION.get(name)
        if i is None:
            if other is not None and name not in other:
                other[name] = value
        elif not seen >> i & 1:
            seen |= 1 << i
            values[i] = value
    values.append(other)
    return tuple(values)


def normalize_attrs(attrs: Iterable[Any], with_other: bool) -> tuple[Any, ...]:
    """Normalise a node's AttributeProto list (see :func:`normalize_attr` and :func:`combine_attrs`).

    Examples
    --------
    >>> A = chakra_classes().AttributeProto
    >>> out = normalize_attrs([A(name="comm_size", uint64_val=8), A(name="pg_name", int32_val=5),
    ...                        A(name="is_cpu_op", int32_val=0), A(name="rf_id", int64_val=3)], True)
    >>> out[1], out[6], out[7], out[-1]
    (8, '5', False, {'rf_id': 3})
    """
    return combine_attrs((normalize_attr(a) for a in attrs), with_other)


_KNOWN_SET = frozenset(NORMALIZED_ATTRS)
_POSITION = {name: i for i, name in enumerate(NORMALIZED_ATTRS)}

#: Write order and member type of the known attributes (what ASTRA-sim/Chakra expect).
WRITE_MEMBERS: tuple[tuple[str, str], ...] = (
    ("is_cpu_op", "bool_val"), ("comm_type", "int64_val"), ("comm_size", "int64_val"),
    ("comm_src", "int32_val"), ("comm_dst", "int32_val"), ("comm_tag", "int32_val"),
    ("comm_priority", "int32_val"), ("pg_name", "string_val"), ("involved_dim", "bool_list"),
    ("num_ops", "int64_val"), ("tensor_size", "uint64_val"), ("op_kind", "string_val"),
    ("gemm_m", "int64_val"), ("gemm_n", "int64_val"),
)
_WRITE_MEMBER = dict(WRITE_MEMBERS)


def write_attr(name: str, value: Any) -> Any:
    """Build the AttributeProto netsim writes for ``name`` = ``value``.

    Known attributes use :data:`WRITE_MEMBERS`; any other name goes through
    :func:`python_to_attr`.

    Examples
    --------
    >>> write_attr("comm_src", 3).WhichOneof("value"), write_attr("involved_dim", (True,)).bool_list.values
    ('int32_val', [True])
    """
    member = _WRITE_MEMBER.get(name)
    if member is None:
        return python_to_attr(name, value)
    attr = chakra_classes().AttributeProto(name=name)
    if member == "bool_list":
        attr.bool_list.SetInParent()
        attr.bool_list.values.extend(bool(v) for v in value)
    else:
        setattr(attr, member, value)
    return attr
