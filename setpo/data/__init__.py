"""Dataset preparation: verl-format parquet files of benchmarks and training sets (python -m setpo.data.prepare)."""

from setpo.data.build import prepare_datasets, prepare_split, read_prepared
from setpo.data.load import DatasetUnavailableError, load_split
from setpo.data.records import answers_of, build_record
from setpo.data.sources import EVAL_BENCHMARKS, SPECS, DatasetSpec, HubSource, get_spec, source_table

__all__ = [
    "EVAL_BENCHMARKS",
    "SPECS",
    "DatasetSpec",
    "DatasetUnavailableError",
    "HubSource",
    "answers_of",
    "build_record",
    "get_spec",
    "load_split",
    "prepare_datasets",
    "prepare_split",
    "read_prepared",
    "source_table",
]
