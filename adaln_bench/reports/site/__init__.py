"""`adaln-bench publish`: a static site of the history of committed and nightly reports (issue 33).

One job per module: `collect` finds and reads report files, `series` groups their points into series
that may be compared (one GPU, shape, quick flag and input draw each), `steps` finds the steps in a series
that stand out of its own noise, `history` runs it over every series, `plots` draws them with matplotlib
(SVG, inlined), `diffs` renders the diff between neighbouring points with the diff engine, `pages` writes
the HTML, and `build` puts the site together in a temporary directory and renames it into place.
"""
