"""Test harness: a real containerd on a temporary root, a stand-in runtime, a probe image."""
