"""What every trace reader needs to build a Timeline: one name table for all slice categories, and
the pid range of GPU "processes" in the trace file (docs/FORMAT.md)."""
from __future__ import annotations

from typing import Dict, List, Sequence

import numpy as np

GPU_PID_BASE = 100_000_000  # GPU "processes" of the trace: above any Linux pid (pid_max <= 2^22)

class NameTable:
    """Distinct names -> small integer ids, shared by every slice category."""

    def __init__(self):
        self.index: Dict[str, int] = {}

    def codes(self, labels: Sequence[str], per_row_codes: np.ndarray) -> np.ndarray:
        """Ids of labels[per_row_codes] (labels given once per distinct value)."""
        ids = np.array([self.index.setdefault(str(label), len(self.index)) for label in labels], dtype=np.int32)
        return ids[per_row_codes] if len(ids) else np.zeros(per_row_codes.size, dtype=np.int32)

    def names(self) -> List[str]:
        return list(self.index)
