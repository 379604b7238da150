"""One Lightning ``Trainer.fit`` over a StreamingDataLoader, run by ``tests/test_lightning.py``.

``python lightning_fit.py DATA OUT PHASE DEVICES BUILD STOP``: PHASE ``first`` trains until
``STOP`` steps and saves a checkpoint there (mid-epoch) from a callback; ``resume`` runs
``fit(ckpt_path=...)`` from it to the end of the epoch. Each rank writes the sample indexes its
training steps saw, in order, and ``len()`` of its loader to ``OUT/PHASE-RANK.json``. BUILD
``datamodule`` makes the loader in a LightningDataModule's ``train_dataloader``; ``script`` makes
it at the top of the script, before the Trainer (and, with ``devices=2``, before Lightning
starts the second process and sets up torch.distributed).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import lightning as L
import torch

from litdata_stream import StreamingDataLoader, StreamingDataset

DATA, OUT, PHASE, DEVICES, BUILD, STOP = sys.argv[1:7]
CKPT = Path(OUT) / "mid-epoch.ckpt"


def make_loader() -> StreamingDataLoader:
    return StreamingDataLoader(StreamingDataset(DATA, shuffle=True), batch_size=3, num_workers=2)


class Model(L.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(3, 1)
        self.seen: list[int] = []

    def training_step(self, batch: dict[str, Any], batch_idx: int) -> torch.Tensor:
        self.seen.extend(batch["index"].tolist())
        return self.layer(batch["x"]).sum()

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.01)


class Data(L.LightningDataModule):
    def train_dataloader(self) -> StreamingDataLoader:
        return make_loader()


class SaveMidEpoch(L.Callback):
    def on_train_batch_end(
        self, trainer: L.Trainer, pl_module: L.LightningModule, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        if trainer.global_step == int(STOP):
            trainer.save_checkpoint(CKPT)


loader = make_loader() if BUILD == "script" else None
first = PHASE == "first"
trainer = L.Trainer(
    accelerator="cpu",
    devices=int(DEVICES),
    strategy="ddp" if int(DEVICES) > 1 else "auto",
    max_epochs=1,
    max_steps=int(STOP) if first else -1,
    callbacks=[SaveMidEpoch()] if first else [],
    logger=False,
    enable_checkpointing=False,
    enable_progress_bar=False,
    enable_model_summary=False,
    default_root_dir=OUT,
)
model = Model()
source: Any = {"train_dataloaders": loader} if loader is not None else {"datamodule": Data()}
trainer.fit(model, **source, ckpt_path=None if first else CKPT)
used = trainer.train_dataloader
record = {"seen": model.seen, "len": len(used) if used is not None else None}
(Path(OUT) / f"{PHASE}-{trainer.global_rank}.json").write_text(json.dumps(record))
