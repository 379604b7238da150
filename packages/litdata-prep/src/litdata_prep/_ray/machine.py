"""``Machine``: what one node of a multi-node ``optimize``/``map`` reserves on a Ray cluster.

Upstream's ``machine=`` names a Lightning cloud instance type; here a machine is the CPUs, GPUs and
memory a node's share of the job reserves on the Ray cluster. The named machines keep upstream's
names and the sizes of the instance types they stand for.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

__all__ = ["Machine"]


@dataclass(frozen=True)
class Machine:
    """The resources one node of a multi-node job reserves on the Ray cluster.

    ``optimize(..., num_nodes=4, machine=Machine.DATA_PREP)`` places the job on 4 nodes that each
    have these resources free (one Ray placement-group bundle per node, on distinct nodes), and
    splits each node's resources among its ``num_workers`` worker actors.

    Attributes:
        name: the machine's name (upstream's, e.g. ``"DATA_PREP"``, or your own).
        cpus: CPUs per node.
        gpus: GPUs per node.
        memory_gb: memory per node, in GiB (0: none reserved).
    """

    name: str
    cpus: float = 1
    gpus: float = 0
    memory_gb: float = 0

    CPU_SMALL: ClassVar[Machine]
    CPU: ClassVar[Machine]
    DATA_PREP: ClassVar[Machine]
    DATA_PREP_MAX: ClassVar[Machine]
    DATA_PREP_ULTRA: ClassVar[Machine]
    T4: ClassVar[Machine]
    T4_X_4: ClassVar[Machine]
    L4: ClassVar[Machine]
    L4_X_4: ClassVar[Machine]
    A10G: ClassVar[Machine]
    A10G_X_4: ClassVar[Machine]
    L40S: ClassVar[Machine]
    L40S_X_4: ClassVar[Machine]
    A100_X_8: ClassVar[Machine]
    H100_X_8: ClassVar[Machine]
    H200_X_8: ClassVar[Machine]

    def __post_init__(self) -> None:
        if self.cpus <= 0 or self.gpus < 0 or self.memory_gb < 0:
            raise ValueError(f"{self}: cpus must be positive, gpus and memory_gb not negative")

    @classmethod
    def named(cls, name: str) -> Machine:
        """The named machine ``name``.

        Args:
            name: one of the names on :class:`Machine` (``"DATA_PREP"``, ``"a10g"``, ...; any case).

        Raises:
            ValueError: no machine has that name; the message lists them.
        """
        found = _NAMED.get(name.strip().upper().replace("-", "_"))
        if found is None:
            raise ValueError(f"machine={name!r} is not a known machine; use one of {sorted(_NAMED)} or Machine(...)")
        return found

    def ray_resources(self, workers: int) -> dict[str, Any]:
        """The Ray options of one of the worker actors sharing a node: its part of the machine.

        Args:
            workers: how many worker actors share the node.
        """
        workers = max(1, workers)
        options: dict[str, Any] = {"num_cpus": self.cpus / workers}
        if self.gpus:
            options["num_gpus"] = self.gpus / workers
        if self.memory_gb:
            options["memory"] = int(self.memory_gb * 2**30 / workers)
        return options

    def bundle(self) -> dict[str, float]:
        """The node's placement-group bundle: everything the machine reserves."""
        bundle: dict[str, float] = {"CPU": self.cpus}
        if self.gpus:
            bundle["GPU"] = self.gpus
        if self.memory_gb:
            bundle["memory"] = float(int(self.memory_gb * 2**30))
        return bundle

    def __str__(self) -> str:
        size = f"{self.cpus:g} CPUs" + (f", {self.gpus:g} GPUs" if self.gpus else "")
        return f"Machine.{self.name} ({size}{f', {self.memory_gb:g} GiB' if self.memory_gb else ''})"


_NAMED = {
    machine.name: machine
    for machine in (
        Machine("CPU_SMALL", cpus=2, memory_gb=8),
        Machine("CPU", cpus=4, memory_gb=16),
        Machine("DATA_PREP", cpus=32, memory_gb=128),
        Machine("DATA_PREP_MAX", cpus=64, memory_gb=256),
        Machine("DATA_PREP_ULTRA", cpus=96, memory_gb=384),
        Machine("T4", cpus=4, gpus=1, memory_gb=16),
        Machine("T4_X_4", cpus=48, gpus=4, memory_gb=192),
        Machine("L4", cpus=4, gpus=1, memory_gb=16),
        Machine("L4_X_4", cpus=48, gpus=4, memory_gb=192),
        Machine("A10G", cpus=8, gpus=1, memory_gb=32),
        Machine("A10G_X_4", cpus=48, gpus=4, memory_gb=192),
        Machine("L40S", cpus=8, gpus=1, memory_gb=64),
        Machine("L40S_X_4", cpus=48, gpus=4, memory_gb=384),
        Machine("A100_X_8", cpus=96, gpus=8, memory_gb=1152),
        Machine("H100_X_8", cpus=192, gpus=8, memory_gb=2048),
        Machine("H200_X_8", cpus=192, gpus=8, memory_gb=2048),
    )
}
for _name, _machine in _NAMED.items():
    setattr(Machine, _name, _machine)


def as_machine(machine: Any) -> Machine | None:
    """``machine=`` as given: None, a :class:`Machine`, a machine's name, or upstream's ``lightning_sdk.Machine``."""
    if machine is None or isinstance(machine, Machine):
        return machine
    if isinstance(machine, str):
        return Machine.named(machine)
    name = getattr(machine, "name", None)  # lightning_sdk's Machine values carry their name
    if isinstance(name, str):
        return Machine.named(name)
    raise TypeError(f"machine={machine!r}: pass a litdata Machine (Machine.DATA_PREP, Machine('x', cpus=8)) or a name")
