"""Intel readers: VTune reports (CSV and text)."""
