"""Segmented log storage: Log, LogManager, LogConfig (see DESIGN.md, "storage/")."""

from strandline.storage.config import TOPIC_CONFIG_KEYS, LogConfig, config_source
from strandline.storage.log import AppendInfo, FetchSlice, Log
from strandline.storage.log_manager import LogManager

__all__ = [
    "TOPIC_CONFIG_KEYS",
    "AppendInfo",
    "FetchSlice",
    "Log",
    "LogConfig",
    "LogManager",
    "config_source",
]
