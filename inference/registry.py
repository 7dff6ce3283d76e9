"""One registration mechanism for everything the package finds by name: `Registry`.

A `Registry` is a read-only mapping {name: item} of one kind, filled by ``register`` (a call or a decorator)
where each item is defined, built-ins and the user's own alike. Two live here, below every guide module (this
module imports no other of `inference`):

- `GUIDES`: guide factories ``factory(model, **options) -> guide`` (`register_guide`); `make_guide` builds one
  by name, so the CLI, `by_site`, ``zoo run`` and checkpoints (`inference.load`) rebuild a guide from a string.
- `FAMILIES`: variational family classes by their ``name`` attribute (`register_family`), for `by_site`.

The catalogue's entries and data sets are registries of the same class (``zoo.registry.ENTRIES``,
``zoo.data.registry.DATASETS``). A registration may carry facts about its item beside it (``Registry.info``):
a guide's ``example`` options, with which tools that try every guide (``zoo run``'s table, the tests) build it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

from base.errors import ArgumentTypeError, InputError

__all__ = ["FAMILIES", "GUIDES", "Registry", "example_options", "make_guide", "register_family", "register_guide"]


class Registry(Mapping):
    """A read-only mapping {name: item} of one `kind` (e.g. "guide"), filled by `register`.

    ``registry[name]`` raises InputError naming `arg` (the argument users pass the name as), the unknown name
    and the known ones (``unknown(name, known names)`` makes the error where given: a registry's own wording). Each name also keeps the keyword facts given with it (`info`). Iteration follows
    registration order.
    """

    def __init__(self, kind: str, arg: str, unknown: Callable[[object, list], Exception] | None = None):
        self.kind, self.arg, self._unknown = kind, arg, unknown
        self._records: dict[str, tuple[object, dict]] = {}

    def register(self, name: str, item=None, **info):
        """Register `item` as `name` (replacing an earlier item of that name), with the facts `info`; returns
        `item`. Without `item`, a decorator registering what it decorates. Raises InputError for a name that is
        not a non-empty string."""
        if not isinstance(name, str) or not name:
            raise InputError("name", name, f"a non-empty string naming the {self.kind}")
        if item is None:
            return lambda decorated: self.register(name, decorated, **info)
        self._records[name] = (item, dict(info))
        return item

    def unregister(self, name: str) -> None:
        """Remove `name` (InputError when it is not registered)."""
        self._lookup(name)
        del self._records[name]

    def info(self, name: str) -> dict:
        """The facts registered with `name` (a copy; {} when none were given)."""
        return dict(self._lookup(name)[1])

    def snapshot(self) -> dict:
        """The registrations as they are now, for `restore` (a test that registers things undoes them so)."""
        return dict(self._records)

    def restore(self, snapshot: dict) -> None:
        """Make the registrations those of `snapshot` (from `snapshot`), dropping every later one."""
        self._records = dict(snapshot)

    def view(self, project: Callable, where: Callable = lambda item: True) -> RegistryView:
        """A live read-only mapping {name: project(item)} of the items for which ``where(item)`` holds."""
        return RegistryView(self, project, where)

    def _lookup(self, name) -> tuple:
        if not isinstance(name, str) or name not in self._records:
            known = sorted(self._records)
            if self._unknown is not None:
                raise self._unknown(name, known)
            raise InputError(self.arg, name, f"one of {known}", f"unknown {self.kind}")
        return self._records[name]

    def __getitem__(self, name: str):
        return self._lookup(name)[0]

    def __contains__(self, name) -> bool:
        return isinstance(name, str) and name in self._records

    def __setitem__(self, name: str, item) -> None:
        """``registry[name] = item`` is ``register(name, item)`` (as when the registries were plain dicts)."""
        self.register(name, item)

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._records))

    def __len__(self) -> int:
        return len(self._records)

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}: {list(self._records)})"


class RegistryView(Mapping):
    """{name: project(item)} over the items of a `Registry` that `where` admits, computed on each access (it
    never holds a copy that could drift from the registry)."""

    def __init__(self, registry: Registry, project: Callable, where: Callable):
        self._registry, self._project, self._where = registry, project, where

    def _names(self) -> list:
        return [n for n, item in self._registry.items() if self._where(item)]

    def __getitem__(self, name: str):
        if name not in self._names():
            raise KeyError(name)
        return self._project(self._registry[name])

    def __contains__(self, name) -> bool:
        return name in self._registry and self._where(self._registry[name])

    def __setitem__(self, name, value) -> None:
        raise ArgumentTypeError(f"{self._registry.kind} view[{name!r}]", value,
                                f"no assignment: a view of the {self._registry.kind} registry is read-only; register "
                                f"the {self._registry.kind} instead (e.g. zoo.register_data for a data set)")

    def __iter__(self) -> Iterator[str]:
        return iter(self._names())

    def __len__(self) -> int:
        return len(self._names())

    def __repr__(self) -> str:
        return repr(dict(self))


GUIDES = Registry("guide", "guide", unknown=lambda name, known: InputError.worded(
    "guide", f"guide: unknown name {name!r}; expected one of {known}", name))
"""Guide factories by name: {name: ``factory(model, **options) -> guide``}; `register_guide` adds one."""
FAMILIES = Registry("family", "families", unknown=lambda name, known: InputError.worded(
    "families", f"families: unknown family {name!r}; expected one of {known}", name))
"""Variational family classes by name: {name: family class}; `register_family` adds one."""


def register_guide(name: str, factory: Callable | None = None, *, example: dict | None = None):
    """Make ``factory(model, **options) -> guide`` available as `name` (`make_guide`, the CLI's ``--guide``,
    `by_site`'s checkpoints, ``zoo run``'s table); without `factory`, a decorator. Returns `factory`.

    The guide's ``config`` must hold ``{"name": name, **options}``: `inference.load` rebuilds the guide of a
    saved posterior as ``make_guide(**config)``. `example`: options (JSON-able) that build the guide on any
    BNN of the catalogue, required ones included, written with site patterns rather than one network's site
    names (e.g. ``{"dropout_sites": ["*/w"]}``); tools that try every guide (``zoo run``) use them. Raises
    InputError for an empty name, a factory that is not callable or an `example` that is not a dict.
    """
    if example is not None and not isinstance(example, dict):
        raise InputError("example", example, "None or a dict of the guide's options")
    if factory is not None and not callable(factory):
        raise InputError("factory", factory, "a callable factory(model, **options) -> guide")
    return GUIDES.register(name, factory, example=dict(example or {}))


def register_family(family_class):
    """Make a family class (a ``name`` class attribute and keyword fields) available to `by_site` by that name;
    returns the class, so that it also decorates one (``@register_family`` above ``@dataclass``)."""
    name = getattr(family_class, "name", None)
    if not isinstance(name, str) or not name:
        raise InputError("family_class", family_class, "a class with a non-empty string attribute `name`")
    return FAMILIES.register(name, family_class)


def make_guide(name: str, model, **options):
    """The guide `name` of `GUIDES` built for `model` with `options`; an unknown name raises InputError listing
    the known ones."""
    return GUIDES[name](model, **options)


def example_options(name: str) -> dict:
    """The ``example`` options registered with guide `name` ({} when none were given)."""
    return dict(GUIDES.info(name).get("example") or {})
