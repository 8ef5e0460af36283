"""The exported run: TensorBoard event file + plugin asset files (see docs/FORMAT.md)."""
