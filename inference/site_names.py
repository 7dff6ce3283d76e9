"""Site names and their ArviZ (netCDF-safe) names, one mapping both ways.

Haiku names a weight by its module path, e.g. ``mlp/~/linear_0/w``, and netCDF (so ``az.to_netcdf``)
refuses "/" in variable and dimension names. `to_arviz` names each variable ``arviz_name(site)``: every "/"
becomes ".", so ``mlp/~/linear_0/w`` is ``mlp.~.linear_0.w``; `site_name` maps back. The mapping is
injective because a site name that already holds "." is refused (InputError) rather than given a name that
another site could also get; "_" is never touched, so ``a/b`` (-> ``a.b``) and ``a_b`` stay apart.

Functions of `inference` that take site names (`to_arviz`'s ``var_names``, `resolve_sites`) accept either.
"""

from __future__ import annotations

from base.errors import InputError

SEPARATOR = "/"
ARVIZ_SEPARATOR = "."


def arviz_name(site: str) -> str:
    """The netCDF-safe ArviZ variable name of `site` (str): "/" -> "." (``mlp/~/linear_0/w`` ->
    ``mlp.~.linear_0.w``). Raises InputError for a name holding "." (it could collide with another site's)."""
    if not isinstance(site, str) or not site:
        raise InputError("site", site, "a non-empty site name (str)")
    if ARVIZ_SEPARATOR in site:
        raise InputError("site", site, f"a site name without {ARVIZ_SEPARATOR!r}",
                         f"ArviZ names replace {SEPARATOR!r} by {ARVIZ_SEPARATOR!r}, so a site name holding "
                         f"{ARVIZ_SEPARATOR!r} could collide with another site's; rename the site")
    return site.replace(SEPARATOR, ARVIZ_SEPARATOR)


def site_name(name: str) -> str:
    """The site name of an ArviZ variable name (the inverse of `arviz_name`: "." -> "/"); a site name passes
    through unchanged (it holds no ".")."""
    if not isinstance(name, str) or not name:
        raise InputError("name", name, "a non-empty site or ArviZ variable name (str)")
    return name.replace(ARVIZ_SEPARATOR, SEPARATOR)


def arviz_names(sites) -> dict:
    """{site: ArviZ name} of every site in `sites` (an iterable of str), in order; InputError for a site
    `arviz_name` refuses or for two sites that would share a name."""
    names: dict[str, str] = {}
    for site in sites:
        name = arviz_name(site)
        if name in names.values():
            other = next(s for s, n in names.items() if n == name)
            raise InputError("site", site, f"a site whose ArviZ name differs from {other!r}'s ({name!r})")
        names[site] = name
    return names


def resolve_sites(names, sites, arg: str = "var_names") -> list:
    """The site names of `names` (a str or a list of str, each a site name or its ArviZ name), in the
    order given. `sites`: the available site names. Raises InputError naming `arg` for a name that is
    neither."""
    names = [names] if isinstance(names, str) else list(names)
    available = list(sites)
    out = []
    for name in names:
        site = name if name in available else (site_name(name) if isinstance(name, str) and name else None)
        if site not in available:
            raise InputError(arg, name, "site names or their ArviZ names (inference.site_names.arviz_name)",
                             f"the sites are {available}")
        out.append(site)
    return out
