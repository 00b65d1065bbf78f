# Real node targets (filled in by the real-node work).
