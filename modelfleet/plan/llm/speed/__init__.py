"""How fast an LLM replica serves: roofline step times, the calibration data, and the load at peak."""
