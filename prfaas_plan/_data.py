"""Where the packaged data lives: reference measurements and traces (each file names its source and
licence in its header or beside it)."""

from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
REFERENCE_DIR = PACKAGE_DIR / "data" / "reference"
TRACES_DIR = PACKAGE_DIR / "data" / "traces"
