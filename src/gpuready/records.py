"""Immutable records that cost almost nothing to define.

``typing.NamedTuple`` builds each class through ``collections.namedtuple``, which compiles a
``__new__`` from source text with ``exec``: about 0.2 ms per class on Python 3.13, and gpuready
defines dozens on the way to any verdict (44 on ``check``'s path). :class:`Record` is the same
thing built without ``exec``: a ``tuple`` subclass whose fields are the class's annotations, in
order, each a read-only attribute over its position, with ``NamedTuple``'s interface
(``_fields``, ``_field_defaults``, ``_make``, ``_replace``, ``_asdict``, equality, ordering and
hashing as tuples, pickling). A class attribute named like a field is that field's default.

    class Reading(Record):
        key: str
        line: int = 0

Methods and properties in the class body stay as written; instances hold no ``__dict__``.
"""

from __future__ import annotations

import operator
from typing import Any

try:  # the C descriptor that collections.namedtuple itself uses for its fields
    from _collections import _tuplegetter
except ImportError:  # pragma: no cover - every CPython from 3.8 has it
    def _tuplegetter(index: int, doc: str) -> property:
        return property(operator.itemgetter(index), doc=doc)


class _RecordType(type):
    """Makes each :class:`Record` subclass: its fields from the annotations of its body (names
    only: under ``from __future__ import annotations`` they are strings), ``__slots__ = ()``,
    and a descriptor per field in place of its default."""

    def __new__(mcs, name: str, bases: tuple[type, ...], namespace: dict[str, Any]):
        fields = tuple(namespace.get("__annotations__", {}))
        namespace.setdefault("__slots__", ())
        inherited = [base for base in bases if isinstance(base, _RecordType) and base._fields]
        if inherited and fields:
            raise TypeError(f"{name}: a record with fields cannot be extended with more")
        if inherited:  # methods added to a record: its fields stay
            return super().__new__(mcs, name, bases, namespace)
        defaults: dict[str, Any] = {}
        for index, field in enumerate(fields):
            if field.startswith("_"):
                raise TypeError(f"{name}: field {field!r} starts with an underscore")
            if field in namespace:
                defaults[field] = namespace[field]
            elif defaults:
                raise TypeError(f"{name}: field {field!r} without a default follows one with")
            namespace[field] = _tuplegetter(index, f"Field {index}: {field}")
        namespace["_fields"] = fields
        namespace["_field_defaults"] = defaults
        # the defaults of the fields from each position on, for a record given fewer values
        values = tuple(defaults.values())
        first = len(fields) - len(values)
        namespace["_defaults_from"] = {first + i: values[i:] for i in range(len(values))}
        return super().__new__(mcs, name, bases, namespace)


class Record(tuple, metaclass=_RecordType):
    """An immutable record: subclass it and annotate its fields (see the module's text)."""

    __slots__ = ()

    def __new__(cls, *args: Any, **kwargs: Any):
        if kwargs or len(args) != len(cls._fields):
            tail = None if kwargs else cls._defaults_from.get(len(args))
            args = cls._bound(args, kwargs) if tail is None else args + tail
        return tuple.__new__(cls, args)

    @classmethod
    def _bound(cls, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[Any]:
        """The values of every field from ``args`` and ``kwargs``, defaults filling the rest;
        a TypeError as a call with the wrong arguments raises."""
        fields = cls._fields
        if len(args) > len(fields):
            raise TypeError(f"{cls.__name__}() takes {len(fields)} arguments, "
                            f"{len(args)} given")
        values = list(args)
        for name in fields[len(args):]:
            if name in kwargs:
                values.append(kwargs.pop(name))
            elif name in cls._field_defaults:
                values.append(cls._field_defaults[name])
            else:
                raise TypeError(f"{cls.__name__}() missing argument {name!r}")
        if kwargs:
            taken = sorted(kwargs)
            raise TypeError(f"{cls.__name__}() got unexpected or repeated arguments {taken}")
        return values

    @classmethod
    def _make(cls, values):
        """A record from an iterable of every field's value, in order."""
        made = tuple.__new__(cls, values)
        if len(made) != len(cls._fields):
            raise TypeError(f"{cls.__name__}: expected {len(cls._fields)} values, "
                            f"got {len(made)}")
        return made

    def _replace(self, **changes: Any):
        """A copy with ``changes``."""
        made = self._make([changes.pop(name, value) for name, value in zip(self._fields, self)])
        if changes:
            raise TypeError(f"{type(self).__name__}: no field {', '.join(sorted(changes))}")
        return made

    def _asdict(self) -> dict[str, Any]:
        """The fields and their values."""
        return dict(zip(self._fields, self))

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={value!r}" for name, value in zip(self._fields, self))
        return f"{type(self).__name__}({shown})"

    def __getnewargs__(self) -> tuple[Any, ...]:
        return tuple(self)


class Factory:
    """A default made anew for each record that takes it: ``tags: list[str] = Factory(list)``."""

    __slots__ = ("make",)

    def __init__(self, make) -> None:
        self.make = make


class MutableRecord:
    """A record whose fields may change after it is made (a result filled in as it is found),
    made without ``exec`` as :class:`Record` is: subclass it and annotate its fields; a class
    attribute named like a field is its default, a :class:`Factory` one made per record. The
    fields are given in order or by name; two records are equal when their types and fields are;
    like a mutable dataclass, a record is not hashable."""

    _fields: tuple[str, ...] = ()
    _defaults: dict[str, Any] = {}
    __hash__ = None  # type: ignore[assignment]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        fields = tuple(cls.__dict__.get("__annotations__", {}))
        if not fields:  # methods added to a record: its fields stay
            return
        cls._fields = fields
        cls._defaults = {name: cls.__dict__[name] for name in fields if name in cls.__dict__}
        for name, value in cls._defaults.items():
            if isinstance(value, Factory):
                delattr(cls, name)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        fields, defaults = self._fields, self._defaults
        if len(args) > len(fields):
            raise TypeError(f"{type(self).__name__}() takes {len(fields)} arguments, "
                            f"{len(args)} given")
        for name, value in zip(fields, args):
            setattr(self, name, value)
        for name in fields[len(args):]:
            if name in kwargs:
                value = kwargs.pop(name)
            elif name in defaults:
                value = defaults[name]
                if isinstance(value, Factory):
                    value = value.make()
            else:
                raise TypeError(f"{type(self).__name__}() missing argument {name!r}")
            setattr(self, name, value)
        if kwargs:
            raise TypeError(f"{type(self).__name__}() got unexpected or repeated arguments "
                            f"{sorted(kwargs)}")

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return all(getattr(self, name) == getattr(other, name) for name in self._fields)

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._fields)
        return f"{type(self).__name__}({shown})"
