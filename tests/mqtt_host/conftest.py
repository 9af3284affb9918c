"""Fixtures of the MQTT host tests (``mqtt_pair`` is importable from here)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
