"""Model and hardware profiles: YAML files in, validated frozen dataclasses out.

``schema`` holds the data classes, ``kinds`` one class per attention kind (its fields and byte, state
and FLOP rules), ``parse`` validates a mapping into them (through the strict pydantic schemas of
``validation``), ``store`` finds and caches the bundled and user profile folders, ``hf_import`` turns a
Hugging Face ``config.json`` into a model profile.
"""

from . import kinds
from .parse import hardware_from_dict, model_from_dict
from .schema import (
                     DTYPE_BYTES,
                     AttentionGroup,
                     Calibration,
                     HardwareProfile,
                     MeasuredPrefill,
                     ModelProfile,
                     MoE,
                     Price,
                     dtype_bytes,
)
from .stack import DEFAULT_STACK, StackProfile, all_stacks, get_stack
from .store import (
    add_profile_dir,
    all_hardware,
    all_models,
    get_hardware,
    get_model,
    profile_dirs,
    read_yaml,
    reset_profile_dirs,
)

__all__ = [
    "DTYPE_BYTES", "AttentionGroup", "Calibration", "HardwareProfile", "MeasuredPrefill", "MoE",
    "ModelProfile", "Price", "dtype_bytes", "kinds", "hardware_from_dict", "model_from_dict",
    "add_profile_dir", "all_hardware", "all_models", "get_hardware", "get_model", "profile_dirs", "read_yaml",
    "reset_profile_dirs",
    "DEFAULT_STACK", "StackProfile", "all_stacks", "get_stack",
]
