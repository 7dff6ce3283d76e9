"""One registration mechanism for everything the package finds by name: `Registry`, and its instances.

A `Registry` is a read-only mapping {name: item} of one kind, filled by ``register`` (a call or a decorator)
where each item is defined, built-ins and the user's own alike. Every registry of the package lives here, at
the bottom of the DAG (base <- models <- inference <- evals <- zoo), so that each package fills its own and
reads the others' without an import running back up; this module imports nothing of the package but
`base.errors`:

=============  ===================================================  ==========================================
registry       {name: item}                                          filled by
=============  ===================================================  ==========================================
`PRIORS`       prior kinds: ``factory(**spec) -> prior``             `models.priors` (``from_spec`` reads it)
`FAMILIES`     variational family classes                            ``inference.register_family``
`GUIDES`       guide factories ``factory(model, **options)``         ``inference.register_guide``
`ESTIMATORS`   gradient estimators of the ELBO                        ``ESTIMATORS.register(name, estimator)``
`CORRUPTIONS`  `evals.corruptions.registry.Corruption` records        `evals.corruptions.registry`
`DATASETS`     `zoo.data.registry.DatasetRecord` records              ``zoo.register_data``
`ENTRIES`      the catalogue's `zoo.registry.Spec` records            ``zoo.register``
=============  ===================================================  ==========================================

A registration may carry facts about its item beside it (``Registry.info``): a guide's ``example`` options, the
models it ``suits`` (from which an entry's guide list is derived, ``zoo list``) and the ``saved_settings`` a saved
config of it must name (``inference.load``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

from base.errors import ArgumentTypeError, InputError

__all__ = ["CORRUPTIONS", "DATASETS", "ENTRIES", "ESTIMATORS", "FAMILIES", "GUIDES", "PRIORS", "Registry",
           "RegistryView"]


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


def _unknown(arg: str, what: str):
    """The error of an unknown name in a registry looked up through argument `arg`: "arg: unknown what 'x';
    expected one of [...]"."""
    return lambda name, known: InputError.worded(arg, f"{arg}: unknown {what} {name!r}; expected one of {known}",
                                                 name)


PRIORS = Registry("prior", "prior", unknown=_unknown("prior", "kind"))
"""Prior kinds by name: {kind: ``factory(**spec) -> prior``} (`models.priors`: "normal", "fan_in_normal", ...)."""
FAMILIES = Registry("family", "families", unknown=_unknown("families", "family"))
"""Variational family classes by name: {name: family class}; ``inference.register_family`` adds one."""
GUIDES = Registry("guide", "guide", unknown=_unknown("guide", "name"))
"""Guide factories by name: {name: ``factory(model, **options) -> guide``}; ``inference.register_guide`` adds
one."""
ESTIMATORS = Registry("estimator", "estimator")
"""Gradient estimators of the ELBO by name (``ESTIMATORS.register("local", Local())``: one line each)."""
CORRUPTIONS = Registry("corruption", "kind")
"""Image corruptions by canonical name: {name: `evals.corruptions.registry.Corruption`}."""
DATASETS = Registry("data set", "data")
"""{name: `zoo.data.registry.DatasetRecord`} of every data set known by name, in registration order."""
ENTRIES = Registry("zoo entry", "name")
"""{name: `zoo.registry.Spec`} of the catalogue's entries; ``zoo.register`` adds one."""
