"""The packet path: testpmd counters, the PVP benchmark through the lab's switch."""
