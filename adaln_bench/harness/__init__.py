"""The harness, in three layers, each importing only the ones below it:

- `measurement/`: what a measurement is (subjects, probes, accuracy, timing, device time, fingerprints);
- `processes/`: how a mode's child process runs and talks to the parent (protocol, child, runner, cold start);
- `assembly/`: how a run is assembled (selection, repetitions, the final reports, the exit code).
"""
