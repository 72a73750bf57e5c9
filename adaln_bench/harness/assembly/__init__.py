"""How a run is assembled: what it measures (`selection`), its sizes, its estimated cost on a CPU, repeated
measurements, the final reports put together from the children's results, and the exit code they give."""
