"""Device meshes: data-parallel SVI over a "data" axis, NUTS chains over a "chains" axis.

Both run through JAX's sharding engine (``jax.sharding.Mesh``, ``NamedSharding``, a plain ``jax.jit``), not
``pmap``. For SVI (``inference.fit(..., mesh=Mesh(devices, ("data",)))``) every minibatch (B, ...) is split
over the mesh's "data" axis (``NamedSharding(mesh, P("data"))``: B / D rows per device, D the axis's size)
while the training data, the guide parameters, the optimiser state, the network state and the key are
replicated (``NamedSharding(mesh, P())``). The SVI step is the one-device step unchanged: the compiler
partitions it, so each device computes its rows' part of the minibatch log-likelihood and XLA inserts the
all-reduce that sums the gradient (no hand-written ``psum``). Other mesh axes (a "model" axis beside "data")
hold replicas.

The random draws do not depend on the sharding: with JAX's partitionable threefry
(``jax_threefry_partitionable``, on by default) element i of a draw is the hash of its key and its flat index
i, whichever device computes it; `check_mesh` refuses a mesh while that flag is off.
"""

from __future__ import annotations

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from base.errors import ArgumentTypeError, InputError

DATA_AXIS = "data"
"""The mesh axis a minibatch's rows are split over."""
CHAIN_AXIS = "chains"
"""The mesh axis NUTS chains are split over (`chain_mesh`)."""


def check_mesh(mesh, batch_size: int) -> Mesh | None:
    """`fit`'s ``mesh``: None, or a ``jax.sharding.Mesh`` with a `DATA_AXIS` ("data") axis whose size divides
    the minibatch size `batch_size` (B rows split into equal parts). Raises ArgumentTypeError for a non-Mesh,
    InputError for a mesh without a "data" axis, one holding a device twice, or a B the axis's size does not
    divide, and InputError when
    JAX's threefry is not partitionable (the draws would then depend on the sharding)."""
    if mesh is None:
        return None
    if not isinstance(mesh, Mesh):
        raise ArgumentTypeError("mesh", mesh, 'None or a jax.sharding.Mesh with a "data" axis, e.g. '
                                'Mesh(np.array(jax.devices()), ("data",))')
    if DATA_AXIS not in mesh.axis_names:
        raise InputError("mesh", f"<a Mesh with axes {tuple(mesh.axis_names)}>", 'a Mesh with a "data" axis '
                         "(the axis minibatches are split over)")
    devices = list(mesh.devices.flat)
    repeated = sorted({str(d) for d in devices if devices.count(d) > 1})
    if repeated:
        raise InputError("mesh", f"<a Mesh of {len(devices)} devices holding {repeated[:3]} more than once>",
                         "a Mesh of distinct devices (each device appears once)",
                         hint="build it from distinct devices, e.g. Mesh(np.array(jax.devices()[:2]), (\"data\",))")
    size = int(mesh.shape[DATA_AXIS])
    if batch_size % size:
        raise InputError("batch_size", batch_size, f'a multiple of the mesh\'s "data" axis size {size} (each '
                         "device takes an equal share of a minibatch's rows)",
                         hint="batch_size is clipped to the number of training examples first")
    if not jax.config.jax_threefry_partitionable:  # type: ignore[attr-defined]
        raise InputError("mesh", f"<a Mesh of {mesh.size} devices>", "no mesh while jax_threefry_partitionable "
                         "is off (the random draws would depend on the sharding)",
                         hint='jax.config.update("jax_threefry_partitionable", True)')
    return mesh


def replicated(mesh: Mesh) -> NamedSharding:
    """The sharding of a value every device of `mesh` holds whole (parameters, optimiser state, data, keys)."""
    return NamedSharding(mesh, PartitionSpec())


def rows_sharding(mesh: Mesh) -> NamedSharding:
    """The sharding of a minibatch (B, ...): its rows (the first axis) split over `DATA_AXIS`."""
    return NamedSharding(mesh, PartitionSpec(DATA_AXIS))


def shard_rows(tree, mesh: Mesh):
    """Inside a jitted function: every array of `tree` (leading axis B) constrained to `rows_sharding`."""
    return jax.lax.with_sharding_constraint(tree, rows_sharding(mesh))


def replicate(tree, mesh: Mesh):
    """Inside a jitted function: every array of `tree` constrained to be `replicated` on `mesh`."""
    return jax.lax.with_sharding_constraint(tree, replicated(mesh))


def put_replicated(tree, mesh: Mesh):
    """Outside jit: every array of `tree` placed whole on every device of `mesh` (a leaf already placed so is
    kept as it is). A leaf held elsewhere goes through the host, so that in a multi-process run (a mesh over
    devices of several processes, `jax.distributed.initialize`) each process supplies its own copy of the same
    value: the global array is assembled from the processes' local copies."""
    target = replicated(mesh)

    def put(value):
        if isinstance(value, jax.Array) and value.sharding.is_equivalent_to(target, value.ndim):
            return value
        return jax.device_put(np.asarray(value), target)

    return jax.tree.map(put, tree)


def chain_mesh(num_chains: int) -> Mesh:
    """A one-axis mesh (`CHAIN_AXIS`) of this process's first `num_chains` devices, one chain each (NUTS's
    chain_method "parallel"); InputError when there are fewer devices than chains."""
    devices = jax.local_devices()
    if num_chains > len(devices):
        raise InputError("num_chains", num_chains, f"at most {len(devices)} (one device per chain)")
    return Mesh(np.array(devices[:num_chains]), (CHAIN_AXIS,))
