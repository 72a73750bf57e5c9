"""What a measurement is: one built candidate (`subject`), the seeded runs the probes compare, the probes, accuracy
against FP64, latency and device time, the fingerprints, and the sequence of them for one candidate (`measure`)."""
