# SPDX-License-Identifier: MIT
# plot_throughput.gp - throughput against producer count, one PNG per
# payload, every ring of the run as one line (lull's drawn thicker), from
# the data perf/json2dat.py writes:
#
#   build/perf/throughput --json > t.json
#   perf/json2dat.py t.json out
#   gnuplot -e "dir='out'" perf/plot_throughput.gp
#
# writes out/throughput_<payload>.png.  Y is logarithmic: the spinning rings,
# the pipe and the eventfd queue lie orders of magnitude apart, and the
# in-order multi-producer rings collapse when there are more producers than
# CPUs.  Error bars: min and max over the runs; the line joins the medians.
# SPSC rings only run with one producer: a single, larger point at x = 1.

if (!exists("dir")) dir = "."
load dir."/throughput.gpi"

set terminal pngcairo size 1100,700 enhanced font "sans,11"
set logscale x 2
set logscale y 10
set xlabel "producers"
set ylabel "throughput (M msgs/s)"
set format y "%g"
set grid xtics ytics mytics lc rgb "#dddddd"
set key outside right top vertical Left reverse samplen 2
set xrange [0.8:*]
set offsets graph 0, graph 0.05, 0, 0
set pointsize 1.2

# One colour and point type per ring name, the same in every plot.
all = "lull-spsc lull-mpsc ck-spsc ck-mpmc ck-mpsc rte-spsc rte-mpsc " \
	. "urcu-wfcq pipe eventfd boost-spsc boost-spsc-bulk moodycamel"
colours = "#c00000 #ff4040 #1f4e9a #3c78d8 #6fa8dc #2e7d32 #66bb6a " \
	. "#8e44ad #7f6000 #b07000 #e6550d #fd8d3c #17becf"
ringindex(r) = (n = 0, \
	sum [k = 1:words(all)] (word(all, k) eq r ? (n = k, 0) : 0), n)
colour(r) = ringindex(r) > 0 ? word(colours, ringindex(r)) : "#000000"
width(r) = r[1:4] eq "lull" ? 3.0 : 1.5
ptype(r) = ringindex(r) > 0 ? ringindex(r) : 1
psize(r) = strstrt(r, "spsc") ? 2.2 : 1.2

do for [p in payloads] {
	rings = value("rings_".p)
	set output sprintf("%s/throughput_%s.png", dir, p)
	set title sprintf("lull vs peers: %s-byte messages, one consumer\n" \
		. "{/*0.8 median of the runs, bars min..max, log scale}", p)
	plot for [i = 1:words(rings)] sprintf("%s/throughput_%s.dat", dir, p) \
		index (i - 1) using 1:2:3:4 with yerrorlines \
		lw width(word(rings, i)) lc rgb colour(word(rings, i)) \
		pt ptype(word(rings, i)) ps psize(word(rings, i)) \
		title word(rings, i)
	unset output
}
