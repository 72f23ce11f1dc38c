"""The Container Device Interface: NVIDIA specs generated, validated and listed."""
