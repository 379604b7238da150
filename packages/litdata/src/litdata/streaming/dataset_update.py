"""Upstream's ``litdata.streaming.dataset_update`` import path."""

from litdata_prep import DatasetUpdate, dataset_update

__all__ = ["DatasetUpdate", "dataset_update"]
