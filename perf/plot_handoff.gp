# SPDX-License-Identifier: MIT
# plot_handoff.gp - perf/handoff's results as four PNGs, from the data
# perf/json2dat.py writes:
#
#   build/perf/handoff --json > h.json
#   perf/json2dat.py h.json out
#   gnuplot -e "dir='out'" perf/plot_handoff.gp
#
# writes, in out/:
#   handoff_cdf.png           latency CDF per mechanism, log x
#   handoff_tail.png          the same as the fraction of messages slower
#                             than x, log-log: the tail (p99, p99.9, max)
#   handoff_idle_wakeups.png  idle wake-ups per second per mechanism (bars)
#   handoff_idle_cpu.png      idle CPU per idle window per mechanism (bars)
# Colours: lull's consumers red to orange, the bare kernel floors blue
# (dashed), the polling consumers black and grey, other libraries' queues
# purple, brown and teal, the mechanisms across processes pink (lull),
# light blue (the floor) and ochre (socket, pipe); a mechanism keeps its
# colour in every plot.  The
# bar charts are logarithmic (poll wakes ~1000 times a second, lull ~2, the
# floors never), so a zero is drawn as a stub on the axis and labelled 0.

if (!exists("dir")) dir = "."
load dir."/handoff.gpi"
if (!exists("safety_ms")) safety_ms = 0
if (!exists("poll_us")) poll_us = 0

set terminal pngcairo size 1100,700 enhanced font "sans,11"

all = "poll spin yield lull lull-uring-futex lull-uring-eventfd " \
	. "lull-epoll lull-blocking lull-spin-park futex-floor " \
	. "eventfd-floor uring-futex-floor uring-eventfd-floor " \
	. "moodycamel-blocking uv-async msg-ring lull-blocking-memfd " \
	. "lull-blocking-xproc lull-uring-futex-xproc futex-xproc-floor " \
	. "unix-xproc pipe-xproc epoll-floor"
colours = "#000000 #8c8c8c #b0b0b0 #7b0000 #d7191c #f46d43 #fdae61 " \
	. "#e7298a #984ea3 #08306b #2171b5 #4eb3d3 #41ab5d " \
	. "#6a3d9a #a6761d #1b9e77 #c51b7d #f768a1 #fa9fb5 #6baed6 " \
	. "#bf812d #80cdc1 #737373"
mechindex(m) = (n = 0, \
	sum [k = 1:words(all)] (word(all, k) eq m ? (n = k, 0) : 0), n)
colour(m) = mechindex(m) > 0 ? word(colours, mechindex(m)) : "#000000"
islull(m) = m[1:4] eq "lull"
isfloor(m) = strstrt(m, "-floor") > 0
width(m) = islull(m) ? 2.5 : (m eq "poll" ? 2.5 : 1.5)
dash(m) = isfloor(m) ? 2 : 1

subtitle = sprintf("{/*0.8 one producer thread to one consumer thread; " \
	. "%d messages x %d runs pooled, gap uniform in 0-%g ms, " \
	. "pin %s; poll sleeps %g ms}", messages, runs, max_gap_us / 1000.0, \
	pin, poll_us / 1000.0)

# --- latency CDF -----------------------------------------------------------
set output dir."/handoff_cdf.png"
set title "Wake-up latency: fraction of messages delivered within x\n" \
	. subtitle
set logscale x 10
set xlabel "latency from push to consumer (us, log scale)"
set ylabel "fraction of messages"
set yrange [0:1]
set ytics 0.1
set format x "%g"
set grid xtics mxtics ytics lc rgb "#dddddd"
set key outside right top vertical Left reverse samplen 3
plot for [i = 1:words(labels)] dir."/handoff_cdf.dat" index (i - 1) \
	using 1:2 with lines lw width(word(mechs, i)) \
	dt dash(word(mechs, i)) lc rgb colour(word(mechs, i)) \
	title word(labels, i)
unset output

# --- the tail --------------------------------------------------------------
set output dir."/handoff_tail.png"
set title "Wake-up latency tail: fraction of messages slower than x\n" \
	. subtitle
set logscale y 10
set yrange [*:1]
set ytics auto
set format y "10^{%L}"
set ylabel "fraction of messages slower (log scale)"
plot for [i = 1:words(labels)] dir."/handoff_cdf.dat" index (i - 1) \
	using 1:3 with steps lw width(word(mechs, i)) \
	dt dash(word(mechs, i)) lc rgb colour(word(mechs, i)) \
	title word(labels, i)
unset output

# --- idle bars -------------------------------------------------------------
reset
set terminal pngcairo size 1100,700 enhanced font "sans,11"
set style fill solid 0.85 border rgb "#404040"
set logscale y 10
set format y "%g"
set grid ytics lc rgb "#dddddd"
set xtics rotate by -35 left nomirror
set xrange [-0.7:words(labels) - 0.3]
set bmargin 9
set key top right box opaque Left reverse
# group: 0 polls, 1 lull, 2 floor, 3 another library's queue, 4 the
# kernel's ways between processes (unix-xproc, pipe-xproc)
gcolour(g) = g == 1 ? 0xd7191c : (g == 2 ? 0x2171b5 : \
	(g == 3 ? 0x6a3d9a : (g == 4 ? 0xbf812d : 0x606060)))
top(v, lo) = v > lo ? v : lo
note = sprintf("{/*0.8 medians of %d runs of a %g s window with no " \
	. "messages; lull's safety net %g ms: up to %g wake-ups/s by design}", \
	runs, idle_seconds, safety_ms, safety_ms > 0 ? 1000.0 / safety_ms : 0)

set output dir."/handoff_idle_wakeups.png"
set title "Idle wake-ups of the consumer thread (voluntary context " \
	. "switches)\n" . note
set ylabel "wake-ups per second (log scale)"
lo = 0.1
set yrange [lo:*]
plot dir."/handoff_idle.dat" \
	using 1:(top($4, lo)):($1 - 0.38):($1 + 0.38):(lo):(top($4, lo)):\
	(gcolour($3)):xtic(2) with boxxyerror lc rgb variable notitle, \
	"" using 1:(top($4, lo) * 1.25):($4 >= 100 ? sprintf("%.0f", $4) : \
	sprintf("%.3g", $4)) with labels font ",10" notitle, \
	NaN with boxes lc rgb "#d7191c" title "lull parked", \
	NaN with boxes lc rgb "#2171b5" title "bare kernel floor", \
	NaN with boxes lc rgb "#6a3d9a" title "other libraries' queues", \
	NaN with boxes lc rgb "#bf812d" title "socket, pipe across processes", \
	NaN with boxes lc rgb "#606060" title "polling (spin and yield " \
	. "never sleep: their cost is CPU)"
unset output

set output dir."/handoff_idle_cpu.png"
set title sprintf("Idle CPU time of the consumer thread per %g s window\n", \
	idle_seconds) . note
set ylabel sprintf("CPU ms per %g s (user + system, log scale)", \
	idle_seconds)
lo = 0.001
set yrange [lo:*]
plot dir."/handoff_idle.dat" \
	using 1:(top($5, lo)):($1 - 0.38):($1 + 0.38):(lo):(top($5, lo)):\
	(gcolour($3)):xtic(2) with boxxyerror lc rgb variable notitle, \
	"" using 1:(top($5, lo) * 1.3):($5 >= 100 ? sprintf("%.0f", $5) : \
	sprintf("%.3g", $5)) \
	with labels font ",10" notitle, \
	NaN with boxes lc rgb "#d7191c" title "lull parked", \
	NaN with boxes lc rgb "#2171b5" title "bare kernel floor", \
	NaN with boxes lc rgb "#6a3d9a" title "other libraries' queues", \
	NaN with boxes lc rgb "#bf812d" title "socket, pipe across processes", \
	NaN with boxes lc rgb "#606060" title "polling"
unset output
