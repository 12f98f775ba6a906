"""The stream path: exactly-once counting into the eventual counter."""
