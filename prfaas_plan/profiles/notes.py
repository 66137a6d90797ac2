"""What the CLI says once after a command about the user profile folders: files skipped as broken and
profiles that shadow bundled ones, for every kind (models and chips: `store`; stacks: `stack`)."""

from __future__ import annotations

from .stack import stack_notes_of_loading
from .store import broken_profiles, shadowing_profiles


def skipped_files() -> list[str]:
    """One line per broken user profile file the command did not need (a file both loaders skipped once)."""
    return sorted(set(broken_profiles() + stack_notes_of_loading()[0]))


def shadowing_files() -> list[str]:
    """One line per user profile (model, chip or stack) used instead of a bundled one."""
    return shadowing_profiles() + stack_notes_of_loading()[1]
