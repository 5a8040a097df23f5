"""What a call writes: span attributes, metrics, events, console lines, their bounds and the conventions' names."""
